"""SPEC Solver Layer: 1-DoF joints, IK chain, 6xN Jacobian, SPEC 5.4 and the robust method.

Imports neither model/ nor app/.
"""
