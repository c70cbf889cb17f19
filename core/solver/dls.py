"""The damped-least-squares solver of SPEC 5.4, with line search and clamping.

All vectors are in world space; positions in metres, rotation errors in radians.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rotations import matrix_to_rotvec
from .chain import build_ik_chain, chain_sphericals, compute_jacobian
from .joints import CompositeJoint, JointNode
from .settings import SolveResult


def pose_error(
    effector: JointNode, target_transform: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(dp, dr)``: ``p_target - p_curr`` (m) and ``rotvec(R_target R_curr^T)`` (rad), world."""
    t = np.asarray(target_transform, dtype=float)
    g = effector.global_transform
    dp = t[:3, 3] - g[:3, 3]
    dr = matrix_to_rotvec(t[:3, :3] @ g[:3, :3].T)
    return dp, dr


ChainState = tuple[list[tuple[float, object]], list[NDArray[np.float64]]]


def save_chain_state(chain: list[JointNode], sphericals: list[CompositeJoint]) -> ChainState:
    """Snapshot of every q and limit in the chain and every spherical quaternion."""
    return (
        [(node.q, node.limits) for node in chain],  # type: ignore[attr-defined]
        [sp.quaternion.copy() for sp in sphericals],
    )


def restore_chain_state(
    chain: list[JointNode], sphericals: list[CompositeJoint], state: ChainState
) -> None:
    """Put back a snapshot from :func:`save_chain_state` (FK must run afterwards)."""
    values, quats = state
    for node, (q, limits) in zip(chain, values, strict=True):
        node.q = q  # type: ignore[attr-defined]
        node.limits = limits  # type: ignore[attr-defined]
    for sp, quat in zip(sphericals, quats, strict=True):
        sp.quaternion = quat.copy()
        sp.virtual_fix.quaternion = quat.copy()


def _apply(chain: list[JointNode], dq: NDArray[np.float64]) -> None:
    for node, d in zip(chain, dq, strict=True):
        node.apply_delta(float(d))


def solve(
    root: JointNode,
    effector: JointNode,
    target_transform: ArrayLike,
    ik_chain: list[JointNode] | None = None,
    max_iterations: int = 100,
    position_tolerance: float = 1e-3,
    orientation_tolerance: float = 1e-1,
    damping: float = 0.0001,
    enable_line_search: bool = True,
    line_search_alpha: float = 1.0,
    line_search_alpha_min: float = 1e-2,
) -> SolveResult:
    """SPEC 5.4 DLS: ``dq = J^T (J J^T + damping I)^-1 [dp; dr]``, line search, clamping.

    The joints are left in the final state with FK current. A start outside the limits is
    first clipped into them (``apply_delta(0)``), so a solve never ends outside its limits.
    Without line search, an unconverged solve keeps the best state it reached (DECISIONS:
    nothing worse, no NaN). ``dhik.solve`` (model/methods.py) adds ``method="robust"``.
    """
    target = np.asarray(target_transform, dtype=float)
    chain = build_ik_chain(root, effector) if ik_chain is None else ik_chain
    sphericals = chain_sphericals(chain)
    eye = damping * np.eye(6)
    iterations = 0
    best: tuple[float, ChainState] | None = None

    def measure() -> tuple[NDArray[np.float64], float, float]:
        dp, dr = pose_error(effector, target)
        return np.concatenate((dp, dr)), math.sqrt(dp @ dp), math.sqrt(dr @ dr)

    def result(converged: bool) -> SolveResult:
        return SolveResult(converged, iterations, current[1], current[2])

    for node in chain:  # a start outside the limits (e.g. a T-pose they exclude) is clipped
        node.apply_delta(0.0)
    root.update_global_transform()
    current = measure()  # the error of the state the joints are in, kept up to date
    while True:
        dx, pe, oe = current
        if pe < position_tolerance and oe < orientation_tolerance:
            return result(True)
        if iterations >= max_iterations or not chain:
            break
        err = float(np.linalg.norm(dx))
        jac = compute_jacobian(chain, effector.global_transform[:3, 3])
        try:
            beta = np.linalg.solve(jac @ jac.T + eye, dx)
        except np.linalg.LinAlgError:
            break
        dq = jac.T @ beta
        if not np.all(np.isfinite(dq)):
            break
        if enable_line_search:
            before = save_chain_state(chain, sphericals)
            alpha = line_search_alpha
            while alpha >= line_search_alpha_min:
                _apply(chain, alpha * dq)
                root.update_global_transform()
                trial = measure()
                if float(np.linalg.norm(trial[0])) < err:
                    current = trial
                    break
                restore_chain_state(chain, sphericals, before)
                alpha *= 0.5
            else:  # no step size improves the error: stop (SPEC 5.4); state as before
                root.update_global_transform()
                return result(False)
        else:
            if best is None or err < best[0]:
                best = (err, save_chain_state(chain, sphericals))
            _apply(chain, dq)
            root.update_global_transform()
            current = measure()
        iterations += 1
    if best is not None and best[0] < float(np.linalg.norm(current[0])):
        restore_chain_state(chain, sphericals, best[1])
        root.update_global_transform()
        current = measure()
    return result(False)


def solve_ik(
    root: JointNode,
    effector: JointNode,
    target_transform: ArrayLike,
    ik_chain: list[JointNode] | None = None,
    max_iterations: int = 100,
    position_tolerance: float = 1e-3,
    orientation_tolerance: float = 1e-1,
    damping: float = 0.0001,
    enable_line_search: bool = True,
    line_search_alpha: float = 1.0,
    line_search_alpha_min: float = 1e-2,
) -> bool:
    """SPEC 5.4 entry point: True when the effector reached the target within tolerance."""
    return solve(
        root,
        effector,
        target_transform,
        ik_chain,
        max_iterations,
        position_tolerance,
        orientation_tolerance,
        damping,
        enable_line_search,
        line_search_alpha,
        line_search_alpha_min,
    ).converged
