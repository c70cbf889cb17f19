"""The solvers under test, behind one small interface.

``setup(scene)`` builds the model (untimed); ``start()`` puts it in the T-pose (untimed);
``solve(target, warm)`` is the timed call (target: world 4x4, metres; ``warm`` says the
model holds the previous frame's answer), returning the iteration count or None;
``values()`` gives the answer as refk joint values (untimed). A peer that needs a
serial chain of coordinate-axis hinges (ikpy, pinocchio, rtb) runs on ``arm7`` only.

Adding a method is one line in ``METHODS`` at the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scenes import Scene

TIGHT_POS, TIGHT_ROT = 1e-5, 1e-4  # stop criterion wherever we control it (m, rad)
MAX_ITERATIONS = 100


class Method:
    """Base: a named solver; ``only`` lists the scenes it runs on (None: all)."""

    name = "?"
    only: tuple[str, ...] | None = None
    cold_limit: int | None = None  # fewer A poses for slow solvers (said in the table)
    repeats: int | None = None  # timing runs, when fewer than --repeats (slow solvers)

    def available(self) -> str | None:
        """None when usable, else why not (e.g. the package failed to import)."""
        return None

    def setup(self, scene: Scene) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        raise NotImplementedError

    def values(self) -> dict[str, Any]:
        raise NotImplementedError

    # A method that solves a whole trajectory in one call (B) overrides these two:
    whole_trajectory = False

    def trajectory(self, targets: list[np.ndarray]) -> Any:
        """Timed: solve every frame of B in one call (from the T-pose)."""
        raise NotImplementedError

    def trajectory_answers(self, solved: Any) -> tuple[list[dict[str, Any]], list[int]]:
        """Untimed: each frame's joint values and iteration count."""
        raise NotImplementedError


# ------------------------------------------------------------------------------ dhik


def _dhik_values(skeleton: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, v in skeleton.joint_values().items():
        if v["type"] == "revolute":
            out[name] = v["angle"]
        elif v["type"] == "prismatic":
            out[name] = v["displacement"]
        else:
            out[name] = v["quaternion"]
    return out


class DhikObjects(Method):
    """The reference: ``solver.solve`` on the joint objects (SPEC 5.4 as written)."""

    def __init__(self, name: str, tight: bool = True) -> None:
        self.name, self.tight = name, tight

    def settings(self) -> Any:
        from dhik.solver.settings import SolverSettings

        if self.tight:
            return SolverSettings(max_iterations=MAX_ITERATIONS, position_tolerance=TIGHT_POS,
                                  orientation_tolerance=TIGHT_ROT)
        return SolverSettings()  # SPEC defaults: 1e-3 m, 0.1 rad

    def setup(self, scene: Scene) -> None:
        from dhik.app.formats import parse_skeleton
        from dhik.model.skeleton import Skeleton
        from dhik.solver.chain import build_ik_chain

        self.sk = Skeleton(parse_skeleton(scene.skeleton))
        self.eff = self.sk.joint(scene.effector)
        self.chain = build_ik_chain(self.sk.root, self.eff)
        self.kwargs = self.settings().kwargs()

    def start(self) -> None:
        self.sk.reset()

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        from dhik.solver.dls import solve

        return solve(self.sk.root, self.eff, target, self.chain, **self.kwargs).iterations

    def values(self) -> dict[str, Any]:
        return _dhik_values(self.sk)


class DhikCompiled(DhikObjects):
    """``fast.solve_spec`` on ``CompiledKinematics``: the same iterates, flat floats."""

    def setup(self, scene: Scene) -> None:
        from dhik.app.formats import parse_skeleton
        from dhik.model.compiled import CompiledKinematics
        from dhik.model.skeleton import Skeleton

        self.sk = Skeleton(parse_skeleton(scene.skeleton))
        self.model = CompiledKinematics(self.sk, [scene.effector])
        self.s = self.settings()

    def start(self) -> None:
        self.model.reset()

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        from dhik.solver.dls_compiled import solve_spec

        return solve_spec(self.model, target, self.s).iterations

    def values(self) -> dict[str, Any]:
        self.model.write_back(self.sk, fk=False)
        return _dhik_values(self.sk)


class DhikPredict(DhikCompiled):
    """``solve_spec`` warm-started from a linear predictor of the two previous answers,
    ``q = 2 q[-1] - q[-2]`` on the 1-DoF columns (clipped; spherical increments are
    folded after each solve, so they are not extrapolated). A bake-level idea: the
    targets are known in advance; not what ``bake.simulate`` does today."""

    def start(self) -> None:
        super().start()
        self.history: list[np.ndarray] = []

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        from dhik.solver.dls_compiled import solve_spec

        if warm and len(self.history) == 2:
            self.model.apply_delta(self.history[1] - self.history[0])
        it = solve_spec(self.model, target, self.s).iterations
        self.history = [*self.history[-1:], self.model.increments()]
        return it


class DhikRobust(DhikObjects):
    """The robust method on its joint space (``model.joint_space.BatchedModel``): A,
    ``lm.solve_one`` from the T-pose (what ``solve_ik(method="robust")`` runs, one pose
    at a time); B, the bake's own ``path.solve_path`` over all frames in one call, so B's
    times are the per-frame average of that call."""

    whole_trajectory = True

    def available(self) -> str | None:
        try:
            from dhik.solver.lm import solve_one  # noqa: F401
            from dhik.solver.path import solve_path  # noqa: F401
        except ImportError as exc:
            return f"the robust engine is not importable: {exc}"
        return None

    def setup(self, scene: Scene) -> None:
        from dhik.app.formats import parse_skeleton
        from dhik.model.joint_space import BatchedModel

        self.model = BatchedModel(parse_skeleton(scene.skeleton), [scene.effector])
        self.s = self.settings()
        self.start()

    def start(self) -> None:
        self.q = np.clip(np.zeros(self.model.n), self.model.lo, self.model.hi)

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        from dhik.solver.lm import solve_one

        res = solve_one(self.model, target, self.q, settings=self.s)
        self.q = res.q[0]
        return int(res.iterations[0])

    def values(self) -> dict[str, Any]:
        return _joint_space_values(self.model, self.q)

    def trajectory(self, targets: list[np.ndarray]) -> Any:
        from dhik.solver.path import solve_path

        return solve_path(self.model, np.array(targets)[:, None], settings=self.s)

    def trajectory_times(self, solved: Any) -> list[float] | None:
        """Per-frame times: a path is solved as one problem (none of its own)."""
        return None

    def trajectory_answers(self, solved: Any) -> tuple[list[dict[str, Any]], list[int]]:
        values = [_joint_space_values(self.model, row) for row in solved.q]
        return values, [int(i) for i in solved.iterations]


def _joint_space_values(model: Any, q: np.ndarray) -> dict[str, Any]:
    """refk joint values (angle, displacement or quaternion) of one coordinate row."""
    out: dict[str, Any] = {}
    for name, v in model.joint_values(q).items():
        out[name] = v.get("angle", v.get("displacement", v.get("quaternion")))
    return out


# ------------------------------------------------------------------------------ peers


def _serial_hinges(scene: Scene) -> list[dict[str, Any]]:
    """The joints root -> effector of a serial chain (what the peers are built from)."""
    path = []
    name = scene.effector
    while name is not None:
        path.append(scene.chain.joints[name])
        name = scene.chain.joints[name].get("parent")
    return path[::-1]


def _axis_index(axis: Any) -> int:
    a = [abs(float(v)) for v in axis]
    if sorted(a) != [0.0, 0.0, 1.0] or min(axis) < 0:
        raise ValueError("peers are built for +X/+Y/+Z hinges only")
    return a.index(1.0)


class IkPy(Method):
    """ikpy (scipy least_squares), full pose (``orientation_mode="all"``), its defaults."""

    name = "ikpy (full pose)"
    only = ("arm7",)
    cold_limit = 200
    repeats = 1

    def available(self) -> str | None:
        try:
            import ikpy  # noqa: F401
        except ImportError as exc:
            return f"not installed: {exc}"
        return None

    def setup(self, scene: Scene) -> None:
        import warnings

        from ikpy.chain import Chain
        from ikpy.link import OriginLink, URDFLink

        links: list[Any] = [OriginLink()]
        mask = [False]
        self.names = []
        for j in _serial_hinges(scene)[1:]:
            off = np.asarray(j.get("offset", [0, 0, 0]), dtype=float)
            if j["type"] == "revolute":
                links.append(URDFLink(j["name"], off, np.zeros(3), rotation=np.asarray(j["axis"],
                                      dtype=float), bounds=tuple(j["limits"])))
                mask.append(True)
                self.names.append(j["name"])
            else:
                links.append(URDFLink(j["name"], off, np.zeros(3), joint_type="fixed"))
                mask.append(False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.chain = Chain(links, active_links_mask=mask)
        self.mask = np.array(mask)
        self.q = np.zeros(len(links))

    def start(self) -> None:
        self.q = np.zeros(len(self.mask))

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        self.q = self.chain.inverse_kinematics_frame(target, initial_position=self.q,
                                                     orientation_mode="all")
        return None

    def values(self) -> dict[str, Any]:
        return dict(zip(self.names, (float(v) for v in self.q[self.mask]), strict=True))


class Pinocchio(Method):
    """pinocchio's documented CLIK loop (log6 error, Jlog6, DLS, ``integrate``), built
    programmatically; ``dt`` 0.1 and damping 1e-12 as documented, or ``dt`` 1 with the
    answer clipped into the limits after each step (``clamp``)."""

    only = ("arm7",)
    repeats = 1

    def __init__(self, name: str, dt: float = 0.1, damp: float = 1e-12,
                 clamp: bool = False) -> None:
        self.name, self.dt, self.damp, self.clamp = name, dt, damp, clamp

    def available(self) -> str | None:
        try:
            import pinocchio  # noqa: F401
        except ImportError as exc:
            return f"not installed: {exc}"
        return None

    def setup(self, scene: Scene) -> None:
        import pinocchio as pin

        self.pin = pin
        model = pin.Model()
        parent, offset = 0, np.zeros(3)
        self.names, lo, hi = [], [], []
        tool = np.eye(4)
        for j in _serial_hinges(scene)[1:]:
            offset = offset + np.asarray(j.get("offset", [0, 0, 0]), dtype=float)
            if j["type"] != "revolute":
                continue
            jm = [pin.JointModelRX, pin.JointModelRY, pin.JointModelRZ][_axis_index(j["axis"])]()
            parent = model.addJoint(parent, jm, pin.SE3(np.eye(3), offset), j["name"])
            offset = np.zeros(3)
            self.names.append(j["name"])
            lo.append(j["limits"][0])
            hi.append(j["limits"][1])
        tool[:3, 3] = offset  # fixed joints after the last hinge
        self.model = model
        model.lowerPositionLimit = np.array(lo)
        model.upperPositionLimit = np.array(hi)
        self.lo, self.hi = np.array(lo), np.array(hi)
        self.data = model.createData()
        self.joint_id = parent
        self.tool_inv = np.linalg.inv(tool)
        self.q = np.zeros(model.nq)

    def start(self) -> None:
        self.q = np.zeros(self.model.nq)

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        pin, model, data = self.pin, self.model, self.data
        m = target @ self.tool_inv
        o_mdes = pin.SE3(m[:3, :3].copy(), m[:3, 3].copy())
        q = self.q.copy()
        eye = np.eye(6)
        i = 0
        while True:
            pin.forwardKinematics(model, data, q)
            i_md = data.oMi[self.joint_id].actInv(o_mdes)
            err = pin.log(i_md).vector
            if np.linalg.norm(err[:3]) < TIGHT_POS and np.linalg.norm(err[3:]) < TIGHT_ROT:
                break
            if i >= MAX_ITERATIONS:
                break
            jac = pin.computeJointJacobian(model, data, q, self.joint_id)
            jac = -np.dot(pin.Jlog6(i_md.inverse()), jac)
            v = -jac.T.dot(np.linalg.solve(jac.dot(jac.T) + self.damp * eye, err))
            q = pin.integrate(model, q, v * self.dt)
            if self.clamp:
                q = np.clip(q, self.lo, self.hi)
            i += 1
        self.q = q
        return i

    def values(self) -> dict[str, Any]:
        return dict(zip(self.names, (float(v) for v in self.q), strict=True))


class Rtb(Method):
    """roboticstoolbox-python ``ETS.ik_LM`` (C++, Chan damping, joint limits on)."""

    only = ("arm7",)

    def __init__(self, name: str, ilimit: int, slimit: int) -> None:
        self.name, self.ilimit, self.slimit = name, ilimit, slimit

    def available(self) -> str | None:
        try:
            import roboticstoolbox  # noqa: F401
        except ImportError as exc:
            return f"not installed: {exc}"
        return None

    def setup(self, scene: Scene) -> None:
        import roboticstoolbox as rtb

        et = rtb.ET
        ets = None
        self.names = []
        for j in _serial_hinges(scene)[1:]:
            parts = [f(v) for f, v in zip((et.tx, et.ty, et.tz), j.get("offset", [0, 0, 0]),
                                          strict=True) if v != 0]
            if j["type"] == "revolute":
                rot = (et.Rx, et.Ry, et.Rz)[_axis_index(j["axis"])]
                parts.append(rot(qlim=list(j["limits"])))
                self.names.append(j["name"])
            for p in parts:
                ets = p if ets is None else ets * p
        self.ets = ets
        self.q = np.zeros(len(self.names))

    def start(self) -> None:
        self.q = np.zeros(len(self.names))

    def solve(self, target: np.ndarray, warm: bool) -> int | None:
        sol = self.ets.ik_LM(target, q0=self.q, ilimit=self.ilimit, slimit=self.slimit,
                             tol=5e-11, joint_limits=True, method="chan")
        self.q = np.asarray(sol.q, dtype=float)  # kept either way: the check is ours
        return int(sol.iterations)

    def values(self) -> dict[str, Any]:
        return dict(zip(self.names, (float(v) for v in self.q), strict=True))


METHODS: list[Method] = [
    DhikObjects("dhik spec (objects)"),
    DhikCompiled("dhik spec (compiled)"),
    DhikCompiled("dhik spec (compiled), SPEC tolerances", tight=False),
    DhikPredict("dhik spec (compiled), SPEC tolerances, 2-frame predictor", tight=False),
    DhikRobust("dhik robust"),
    IkPy(),
    Pinocchio("pinocchio CLIK (documented loop)"),
    Pinocchio("pinocchio CLIK dt=1, clamped", dt=1.0, damp=1e-6, clamp=True),
    Rtb("rtb ik_LM (1 search)", ilimit=100, slimit=1),
    Rtb("rtb ik_LM (default restarts)", ilimit=30, slimit=100),
]

