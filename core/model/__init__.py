"""SPEC Model Layer: definitions, SphericalJoint, Skeleton and the compiled model.

Imports solver/, never app/.
"""
