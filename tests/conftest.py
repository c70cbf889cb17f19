"""Hypothesis profiles shared by tests/core and tests/addon.

- ``ci`` (loaded when ``CI`` is set, as `make test` and .ci/run do): derandomized, so a
  run on a clean clone draws the same examples every time and cannot fail at random.
- ``fuzz`` (`make fuzz`): fresh random examples, ten times as many as each test asks for.
- ``dev`` (default otherwise): hypothesis' normal random examples.

``HYPOTHESIS_PROFILE`` names a profile explicitly and wins over ``CI``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/fixtures.py

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz", derandomize=False, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True)

_profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
settings.load_profile(_profile)

FUZZ_FACTOR = 10  # `make fuzz`: this many times each test's own max_examples


def pytest_collection_modifyitems(items: list) -> None:  # noqa: ANN001
    """Under the ``fuzz`` profile, scale every property test's own ``max_examples``."""
    if _profile != "fuzz":
        return
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and getattr(test, "is_hypothesis_test", False):
            test._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
                own, max_examples=own.max_examples * FUZZ_FACTOR)
