"""Skeletons shared by tests/core and tests/addon (one copy each).

``tests/conftest.py`` puts this folder on ``sys.path``, so a test writes
``from fixtures import SPINE_ARM``.
"""

from __future__ import annotations

from typing import Any

# An arm on a spine: a revolute spine (world Z), a ball shoulder, a hinged elbow (world Z,
# limited) and a fixed hand, the effector. Metres, radians. Chain length 3 (hand, elbow,
# shoulder) leaves the spine to its own animation.
SPINE_ARM: dict[str, Any] = {"root_name": "Root", "joints": [
    {"name": "Root", "type": "fixed", "offset": [0, 0, 0], "parent": None},
    {"name": "Spine", "type": "revolute", "offset": [0, 0, 0.5], "parent": "Root",
     "axis": [0, 0, 1]},
    {"name": "Shoulder", "type": "spherical", "offset": [0.2, 0, 0.5], "parent": "Spine"},
    {"name": "Elbow", "type": "revolute", "offset": [0.3, 0, 0], "parent": "Shoulder",
     "axis": [0, 0, 1], "limits": [0.05, 2.5]},
    {"name": "Hand", "type": "fixed", "offset": [0.3, 0, 0], "parent": "Elbow"},
]}
