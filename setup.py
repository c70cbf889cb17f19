"""Package discovery for the pip package ``dhik`` (the folder ``core/``).

pyproject.toml holds the metadata; this file only lists the packages, found on disk, so
that a new sub-package (``core/solver/robust/`` was once left out of a hand-written
list) is always in the wheel. ``tests/install/test_install.py`` builds the wheel and
checks that every module under ``core/`` is in it.
"""

from setuptools import find_packages, setup

setup(
    packages=["dhik", *(f"dhik.{name}" for name in find_packages("core"))],
)
