"""SPEC Application Layer without Blender: JSON formats, interpolation, bake, the CLI."""
