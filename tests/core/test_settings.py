"""``RobustOptions`` (``solver.settings``): every field acts on a robust bake.

For each field a bake is run with only that field changed; its iterations, joint values
or reported jumps must differ from the default bake's (an option that does nothing is
refused by this test). The LM's fields act on a cold bake (every frame alone, restarts for
the frame that cannot be reached), the planner's on a trajectory bake. arm7, 24 frames of
a smooth path, frame 12 unreachable (below the arm's base). Frames: world; metres, radians.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest
from dhik.app.bake import simulate
from dhik.app.formats import load_skeleton
from dhik.model.joint_space import BatchedModel
from dhik.model.skeleton import Skeleton
from dhik.solver.lm import Problem
from dhik.solver.settings import RobustOptions, SolverSettings
from fixtures import ARM7, smooth_path

TIGHT = SolverSettings(position_tolerance=1e-5, orientation_tolerance=1e-4)

# per field: the bake it shows in ("cold": warm_start False, "path": a trajectory) and a
# value other than the default
CHANGES: dict[str, tuple[str, Any]] = {
    "lm_damping": ("cold", 1.0),
    "lm_damping_floor": ("cold", 1e-3),
    "stall_window": ("cold", 2),
    "stall_ratio": ("cold", 0.9),
    "restarts": ("cold", 1),
    "restart_rows": ("cold", 2),
    "restart_iterations": ("cold", 5),
    "seed": ("cold", 1),
    "scaled_columns": ("cold", False),
    "stride": ("path", 1),
    "coarse_motion": ("path", 0.1),
    "grid": ("path", 8),
    "free_count": ("path", 1),
    "power": ("path", 2.0),
    "path_rounds": ("path", 1),
    "flip_factor": ("path", 1.2),
    "retries": ("path", 0),
    "window": ("path", 12),
}


@functools.cache
def targets() -> tuple[tuple[int, np.ndarray], ...]:
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    world = model.transforms(smooth_path(model.lo, model.hi, 24, 3))[:, 0]
    # unreachable, though within the ball the arm cannot leave (0.9 of its reach straight
    # below its first joint: its limits keep it above): restarts, the closest approach,
    # a jump
    centre, radius = model.reach_t(np.zeros((model.n, 1)))
    world[12, :3, 3] = centre[0, :, 0] + [0.0, 0.0, -0.9 * float(radius[0])]
    return tuple(enumerate(world))


def fingerprint(scene: str, options: RobustOptions) -> tuple[bytes, bytes, tuple[int, ...]]:
    """A bake's iterations per frame, joint values and jumps."""
    result = simulate(Skeleton(load_skeleton(ARM7)), list(targets()), settings=TIGHT,
                      warm_start=scene == "path", method="robust", options=options)
    values = np.array([[e["angle"] for e in fr["joints"].values()] for fr in result.frames])
    return (np.asarray(result.records.iterations).tobytes(), values.tobytes(),  # type: ignore[attr-defined]
            tuple(result.jumps))


@functools.cache
def default(scene: str) -> tuple[bytes, bytes, tuple[int, ...]]:
    return fingerprint(scene, RobustOptions())


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(RobustOptions)])
def test_every_robust_option_acts(name: str) -> None:
    scene, value = CHANGES[name]  # a new field needs a case here
    assert value != getattr(RobustOptions(), name)
    changed = fingerprint(scene, dataclasses.replace(RobustOptions(), **{name: value}))
    assert changed != default(scene), f"RobustOptions.{name}={value!r} changed nothing"


def test_the_scenes_exercise_what_the_options_steer() -> None:
    """The default bakes restart (cold: more iterations than one search on the frame out
    of reach) and report that frame's jump (path)."""
    cold_iterations = np.frombuffer(default("cold")[0], dtype=np.int64)
    assert cold_iterations[12] > TIGHT.max_iterations
    model = BatchedModel(load_skeleton(ARM7), ["Tool"])
    problem = Problem(model, np.array([t for _, t in targets()])[:, None], None, TIGHT)
    assert not problem.out_of_reach()[12]  # restarts are not skipped there
    assert 12 in default("path")[2] or 13 in default("path")[2]
