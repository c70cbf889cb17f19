"""The robust engine: Levenberg-Marquardt iterations on a ``CoordinateModel``.

See the package docstring for the method. Frames: world. Units: metres and radians.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul
from weakref import WeakKeyDictionary

import numpy as np
from numpy.typing import ArrayLike

from ...floatmath import Quat, intrinsic_xyz, quat_mul, quat_unit, solve_spd
from ..kinematics import PRISMATIC, VIRTUAL, CoordinateModel, Pole
from ..settings import SolverSettings
from .angles import Coords, angles_in_box, box_angles, quat_rotvec, same_rotation
from .options import (
    GROW,
    INTERIOR,
    MAX_MULTIPLIER,
    RESTART_WINDOW,
    SHRINK,
    STALL_RATIO,
    STALL_WINDOW,
    RobustOptions,
    RobustResult,
    Weight,
    checked_weights,
)
from .step import bounded_step, factor6, solve6

POLE_SETTLE = 30  # iterations a converged solve may spend turning toward its poles
POLE_TOLERANCE = 1e-4  # rad: a chain this close to its pole's swivel angle is done


def _sub(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(map(mul, a, b))


def _cross(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def _norm(a: Sequence[float]) -> float:
    return math.sqrt(_dot(a, a))


def _unit(a: Sequence[float]) -> list[float] | None:
    n = _norm(a)
    return None if n < 1e-12 else [v / n for v in a]


def _perp(a: Sequence[float], u: Sequence[float] | None) -> list[float]:
    """``a`` without its component along the unit vector ``u`` (``a`` if ``u`` is None)."""
    if u is None:
        return list(a)
    k = _dot(a, u)
    return [v - k * w for v, w in zip(a, u, strict=True)]


def stalled(history: list[float]) -> bool:
    """No real progress over the last ``STALL_WINDOW`` iterations."""
    if len(history) <= STALL_WINDOW:
        return False
    return history[-1] > STALL_RATIO * history[-1 - STALL_WINDOW]



class Engine:
    """The robust method's iterations on a ``CoordinateModel`` (world; m, rad)."""

    def __init__(self, model: CoordinateModel, weights: Sequence[Weight] | None,
                 settings: SolverSettings, options: RobustOptions) -> None:  # fmt: skip
        self.model = model
        self.options = options
        n = self.n = model.n
        count = len(model.effectors)
        self.weights = checked_weights(weights, count)
        self.ptol = settings.position_tolerance
        self.otol = settings.orientation_tolerance
        self.lo: Coords = list(model.lo0)  # the boxes: limits and spherical angle limits
        self.hi: Coords = list(model.hi0)
        self.prismatic = [kind == PRISMATIC for kind in model.column_kinds]
        self.real = [c for c in range(n) if model.column_kinds[c] != VIRTUAL]
        # 0.5 * a + 0.5 * b: (a + b) / 2 to the bit, without overflow for limits of 1e308
        self.mid = [0.5 * a + 0.5 * b if math.isfinite(a) and math.isfinite(b) else None
                    for a, b in zip(self.lo, self.hi, strict=True)]  # None: no limits
        cols_of: dict[str, list[int]] = {}
        for c in range(n):
            name, k = model.column_joint[c]
            if model.column_kinds[c] == VIRTUAL:
                cols_of.setdefault(name, [0, 0, 0])[k] = c
        # per spherical joint: its three columns and whether its angles are boxed
        self.sph: list[tuple[int, tuple[int, int, int], bool]] = []
        for s, name in enumerate(model.spherical_names):
            cs = cols_of[name]
            boxed = any(math.isfinite(self.lo[c]) or math.isfinite(self.hi[c]) for c in cs)
            self.sph.append((s, (cs[0], cs[1], cs[2]), boxed))
        self.free_sph = [c for _, cs, boxed in self.sph if not boxed for c in cs]
        self.theta: list[list[float]] = [[0.0, 0.0, 0.0] for _ in self.sph]
        self.scale = 1.0
        self.targets: list[tuple[tuple[float, ...], tuple[float, ...]]] = []
        self.poles: Sequence[Pole | None] | None = None  # per effector, from the targets
        self.pole_error = 0.0  # largest swivel angle (rad) a pole still asks for
        self.iterations = 0
        self._chord: tuple[list[Sequence[float]], tuple[float, ...]] | None = None
        self.canonical()
        longest = 0.0
        for k in range(count):
            for col in model.jacobian_columns(k):
                longest = max(longest, math.sqrt(col[0] ** 2 + col[1] ** 2 + col[2] ** 2))
        self.scale = longest if longest > 1e-6 else 1.0
        # the first restart of a cold solve from the T-pose: inside the limits, off
        # mid-range (the T-pose is singular for many chains); a box wider than the
        # restarts' window (randomize) has no useful mid-range: the T-pose, clipped
        self.interior = [
            min(max(0.0, a), b) if m is None or not b - a <= 2 * self.window(c)
            else m + INTERIOR * (b - m)
            for c, (m, a, b) in enumerate(zip(self.mid, self.lo, self.hi, strict=True))]
        self.single = count == 1 and self.weights[0][0] > 0 and self.weights[0][1] > 0

    # -- state ---------------------------------------------------------------------------
    def canonical(self) -> None:
        """Fold pending increments, clip into the boxes, re-derive angles and limits; FK."""
        m = self.model
        q, lo0, hi0 = m.q, m.lo0, m.hi0
        changed = False
        for c in self.real:
            v = q[c]
            if not lo0[c] <= v <= hi0[c]:
                q[c] = min(max(v, lo0[c]), hi0[c])
                changed = True
        for s, cs, boxed in self.sph:
            changed = True
            quat = m.quats[s]
            a, b, g = (q[c] for c in cs)
            if a or b or g:
                quat = quat_unit(quat_mul(quat, intrinsic_xyz(a, b, g)))
            if boxed:
                lo, hi = [lo0[c] for c in cs], [hi0[c] for c in cs]
                if same_rotation(quat, intrinsic_xyz(*self.theta[s])):
                    theta = box_angles(self.theta[s], lo, hi)  # keep the angles we had
                else:
                    theta = angles_in_box(quat, lo, hi)
                self._set_sph(s, cs, theta)
            else:
                m.quats[s] = quat
                for c in cs:
                    q[c] = 0.0
        if changed:
            m.touch()
        m.update()

    def _set_sph(self, s: int, cs: tuple[int, int, int], theta: list[float]) -> None:
        m = self.model
        self.theta[s] = theta
        m.quats[s] = intrinsic_xyz(*theta)
        for c, t in zip(cs, theta, strict=True):
            m.q[c] = 0.0
            m.lo[c] = m.lo0[c] - t
            m.hi[c] = m.hi0[c] - t

    def coords(self) -> Coords:
        """``x``: per column its value (rad, m), a boxed spherical column its angle, a free
        spherical column 0 (its increment)."""
        x = list(self.model.q)
        for s, cs, boxed in self.sph:
            if boxed:
                x[cs[0]], x[cs[1]], x[cs[2]] = self.theta[s]
        return x

    def save(self) -> tuple[object, list[list[float]]]:
        return self.model.save(), [t[:] for t in self.theta]

    def restore(self, snap: tuple[object, list[list[float]]]) -> None:
        self.model.restore(snap[0])
        self.theta = [t[:] for t in snap[1]]
        self.model.update()

    def apply(self, dx: Sequence[float]) -> None:
        """``x += dx`` (inside the boxes); free spherical increments folded; FK."""
        m = self.model
        q, lo0, hi0 = m.q, m.lo0, m.hi0
        for c in self.real:
            v = q[c] + dx[c]
            q[c] = lo0[c] if v < lo0[c] else hi0[c] if v > hi0[c] else v
        for s, cs, boxed in self.sph:
            if boxed:
                theta = [t + dx[c] for t, c in zip(self.theta[s], cs, strict=True)]
                self._set_sph(s, cs, box_angles(theta, [lo0[c] for c in cs],
                                                 [hi0[c] for c in cs]))
            else:
                m.quats[s] = quat_unit(quat_mul(m.quats[s], intrinsic_xyz(
                    dx[cs[0]], dx[cs[1]], dx[cs[2]])))
        m.touch()
        m.update()

    def set_state(self, x: Coords, quats: Sequence[Quat]) -> None:
        """Put coordinates ``x`` (free spherical joints: ``quats``) into the model; FK."""
        m = self.model
        for c in self.real:
            m.q[c] = min(max(x[c], m.lo0[c]), m.hi0[c])
        for s, cs, boxed in self.sph:
            if boxed:
                self._set_sph(s, cs, box_angles([x[c] for c in cs], [m.lo0[c] for c in cs],
                                                 [m.hi0[c] for c in cs]))
            else:
                m.quats[s] = quats[s]
                for c in cs:
                    m.q[c] = 0.0
        m.touch()
        m.update()

    def offsets(self, x: Coords, anchor: tuple[Coords, Sequence[Quat]]) -> list[float]:
        """Column motion from the state (``x``) to ``anchor`` (first order for free
        spherical joints: the rotation vector in the joint's frame)."""
        ax, aq = anchor
        d = [a - b for a, b in zip(ax, x, strict=True)]
        for s, cs, boxed in self.sph:
            if not boxed:
                cur = self.model.quats[s]
                rel = quat_mul((cur[0], -cur[1], -cur[2], -cur[3]), aq[s])
                d[cs[0]], d[cs[1]], d[cs[2]] = quat_rotvec(rel)
        return d

    def anchor_of(self) -> tuple[Coords, list[Quat]]:
        """The current state as an anchor (coordinates, quaternions)."""
        return self.coords(), list(self.model.quats)

    # -- residual and Jacobian --------------------------------------------------------
    def set_targets(self, targets: Sequence[ArrayLike]) -> None:
        """World 4x4 targets (metres), one per effector."""
        if len(targets) != len(self.weights):
            raise ValueError(f"need one target per effector ({len(self.weights)})")
        self.targets = []
        for t in targets:
            (r0, r1, r2, p0), (r3, r4, r5, p1), (r6, r7, r8, p2) = np.asarray(
                t, dtype=float)[:3].tolist()
            self.targets.append(((r0, r1, r2, r3, r4, r5, r6, r7, r8), (p0, p1, p2)))
        driven = getattr(targets, "driven", None)  # a FrameTargets sets driven joints
        if driven:
            self.model.drive(driven)
            self.model.update()
        poles = getattr(targets, "poles", None)
        self.poles = poles if poles and any(p is not None for p in poles) else None

    def measure(self) -> tuple[list[float], list[tuple[float, float]], float]:
        """Weighted residual (position rows over the scale), per-effector ``(m, rad)``
        errors, and the largest counted error over its tolerance (< 1: converged)."""
        rows: list[float] = []
        per = []
        bad = 0.0
        for k, (wp, wr) in enumerate(self.weights):
            ex, ey, ez, rx, ry, rz = self.model.pose_error(k, *self.targets[k])
            pe = math.sqrt(ex * ex + ey * ey + ez * ez)
            oe = math.sqrt(rx * rx + ry * ry + rz * rz)
            per.append((pe, oe))
            if wp > 0.0:
                f = wp / self.scale
                rows += (ex * f, ey * f, ez * f)
                bad = max(bad, pe / self.ptol)
            if wr > 0.0:
                rows += (rx * wr, ry * wr, rz * wr)
                bad = max(bad, oe / self.otol)
        return rows, per, bad

    def in_coords(self, jac: list[tuple[float, ...]]) -> None:
        """Model columns -> columns in the coordinates ``x``, in place: a boxed spherical
        joint's local-axis columns mixed into d/d(a, b, c) of Rx(a) Ry(b) Rz(c)."""
        for s, (c1, c2, c3), boxed in self.sph:
            if boxed:
                _, b, g = self.theta[s]
                cb, sb, cg, sg = math.cos(b), math.sin(b), math.cos(g), math.sin(g)
                j1, j2, j3 = jac[c1], jac[c2], jac[c3]
                jac[c1] = tuple(cg * cb * u - sg * cb * v + sb * t
                                for u, v, t in zip(j1, j2, j3, strict=True))
                jac[c2] = tuple(sg * u + cg * v for u, v in zip(j1, j2, strict=True))

    def columns(self) -> list[Sequence[float]]:
        """The weighted Jacobian by columns, in the coordinates ``x`` (world frame)."""
        model = self.model
        parts = [model.jacobian_columns(k) for k in range(len(self.weights))]
        for jac in parts:
            self.in_coords(jac)
        f0 = self.weights[0][0] / self.scale
        if self.single:
            wr = self.weights[0][1]
            if wr == 1.0:
                return [(a * f0, b * f0, c * f0, d, e, g) for a, b, c, d, e, g in parts[0]]
            return [(a * f0, b * f0, c * f0, d * wr, e * wr, g * wr)
                    for a, b, c, d, e, g in parts[0]]
        out: list[list[float]] = [[] for _ in range(self.n)]
        for jac, (wp, wr) in zip(parts, self.weights, strict=True):
            f = wp / self.scale
            for c, col in enumerate(jac):
                if wp > 0.0:
                    out[c] += (col[0] * f, col[1] * f, col[2] * f)
                if wr > 0.0:
                    out[c] += (col[3] * wr, col[4] * wr, col[5] * wr)
        return out  # type: ignore[return-value]

    def pole_motion(self) -> list[float]:
        """The least-norm motion (coordinates) that turns each chain with a pole toward
        it, and ``pole_error``: the largest swivel angle (rad) still asked for.

        A chain's bend point is the mean of its joints between the first and the
        effector; the swivel is its angle about the line from the first joint to the
        target (world), measured against the pole's direction turned by ``pole.angle``.
        The step solver keeps of this motion only what leaves the targets alone."""
        model, d = self.model, [0.0] * self.n
        self.pole_error = 0.0
        for k, pole in enumerate(self.poles or ()):
            bends = model.chains[k][1:-1]
            if pole is None or not bends:
                continue
            r0 = model.joint_position(model.chains[k][0])
            u = _unit(_sub(self.targets[k][1], r0))
            b = [sum(v) / len(bends) for v in zip(*(model.joint_position(n) for n in bends),
                                                    strict=True)]
            bp = _perp(_sub(b, r0), u)
            pp = _perp(_sub(pole.position, r0), u)
            nb, npp = _norm(bp), _norm(pp)
            if u is None or nb < 1e-9 or npp < 1e-9:
                continue  # the pole or the bend lies on the line: no direction to turn to
            ca, sa = math.cos(pole.angle), math.sin(pole.angle)
            want = [ca * a + sa * c for a, c in zip(pp, _cross(u, pp), strict=True)]
            phi = math.atan2(_dot(u, _cross(bp, want)), _dot(bp, want))
            self.pole_error = max(self.pole_error, abs(phi))
            n = [v / nb for v in _cross(u, bp)]  # the bend point's way of turning
            cols: list[tuple[float, ...]] = [(0.0, 0.0, 0.0)] * self.n
            for name in bends:
                for c, col in enumerate(model.point_columns(name)):
                    cols[c] = tuple(a + v / len(bends) for a, v in zip(cols[c], col,
                                                                       strict=True))
            self.in_coords(cols)
            # the swivel's gradient within the targets' null space: the least-norm motion
            # there that turns the bend point by phi (to first order)
            jn = self.null_space([_dot(n, col) / nb for col in cols])
            norm2 = sum(v * v for v in jn)
            if norm2 > 1e-12:
                for c in range(self.n):
                    d[c] += phi * jn[c] / norm2
        return d

    def turn_to_poles(self) -> bool:
        """One step toward the poles from a converged state: the null-space motion (line
        search on its length), then plain iterations back onto the targets. True when
        the swivel error went down and the targets are still met; False (state as before)
        when the poles are met or no step helps."""
        turn = self.pole_motion()
        start = self.pole_error
        if start < POLE_TOLERANCE:
            return False
        before, poles = self.save(), self.poles
        alpha = 1.0
        try:
            self.poles = None  # the corrections below chase the targets alone
            while alpha >= 1.0 / 64.0:
                self.apply([alpha * v for v in turn])
                if self.run(10):
                    self.poles = poles
                    self.pole_motion()
                    if self.pole_error < start:
                        return True
                    self.poles = None
                self.restore(before)
                alpha *= 0.5
        finally:
            self.poles = poles
        self.pole_error = start
        return False

    def null_space(self, d: list[float]) -> list[float]:
        """``d`` without what it would change of the weighted targets: ``d - J+ J d``."""
        cols = self.columns()
        m = len(cols[0]) if cols else 0
        if m == 0:
            return d
        a = [[sum(col[i] * col[j] for col in cols) + (1e-12 if i == j else 0.0)
              for j in range(m)] for i in range(m)]
        jd = [sum(col[i] * v for col, v in zip(cols, d, strict=True)) for i in range(m)]
        y = solve_spd(a, jd)
        if y is None:
            return [0.0] * self.n
        return [v - sum(map(mul, col, y)) for v, col in zip(d, cols, strict=True)]

    # -- one search ---------------------------------------------------------------------
    def run(self, budget: int, anchor: tuple[Coords, Sequence[Quat]] | None = None,
            settle: int = 0, chord: bool = False) -> bool:  # fmt: skip
        """LM iterations until converged (True), stalled or ``budget`` spent (best kept).

        With an ``anchor`` each step is damped toward it instead of toward no motion;
        ``settle`` more iterations then move toward it within the converged poses;
        ``chord`` tries the last Jacobian computed (by a ``chord`` run) first.
        """
        opts = self.options
        if self.poles:
            settle = max(settle, POLE_SETTLE)
        e, per, bad = self.measure()
        cost = 0.5 * sum(map(mul, e, e))
        history = [bad]
        multiplier = 1.0
        used = 0
        self.last_per = per
        while bad >= 1.0 or settle > 0:
            if bad < 1.0:
                settle -= 1
            elif used >= budget or stalled(history):
                return False
            used += 1
            self.iterations += 1
            if self.poles and bad < 1.0:  # on target: turn the chains toward their poles
                if not self.turn_to_poles():
                    return True
                e, per, bad = self.measure()
                cost = 0.5 * sum(map(mul, e, e))
                self.last_per = per
                continue
            x = self.coords()
            # the poles say where the chains turn: no pull toward the anchor then
            d = [0.0] * self.n if anchor is None or self.poles else self.offsets(x, anchor)
            if used == 1 and chord and self._chord is not None:
                # a chord step: the previous solve's last Jacobian and factor (a warm
                # frame moves little); kept only if it stays in the box and helps
                cols, low = self._chord
                r = list(e)
                for col, dj in zip(cols, d, strict=True):
                    if dj:
                        for i in range(6):
                            r[i] -= col[i] * dj
                dx = [a + b for a, b in zip(solve6(low, cols, r), d, strict=True)]
                if all(a <= v + t <= b for v, t, a, b in zip(x, dx, self.lo, self.hi,
                                                             strict=True)):
                    before = self.save()
                    self.apply(dx)
                    e_new, per_new, bad_new = self.measure()
                    cost_new = 0.5 * sum(map(mul, e_new, e_new))
                    if cost_new < cost:
                        e, per, bad, cost = e_new, per_new, bad_new, cost_new
                        self.last_per = per
                        history.append(bad)
                        continue
                    self.restore(before)
            cols = self.columns()
            if chord and len(e) == 6 and self.n >= 6:
                low6 = factor6(cols, opts.damping * cost + opts.damping_floor)
                self._chord = None if low6 is None else (cols, low6)
            while True:  # until a step lowers the cost
                w = multiplier * opts.damping * cost + opts.damping_floor
                trial = bounded_step(cols, e, x, self.lo, self.hi, w, d)
                if trial is not None:
                    before = self.save()
                    self.apply(trial)
                    e_new, per_new, bad_new = self.measure()
                    cost_new = 0.5 * sum(map(mul, e_new, e_new))
                    if cost_new < cost or (bad < 1.0 and bad_new < 1.0):
                        break
                    self.model.restore(before[0])  # FK at the next apply (or below)
                    self.theta = before[1]
                multiplier *= GROW
                if multiplier > MAX_MULTIPLIER:
                    self.model.update()
                    return bad < 1.0
            e, per, bad, cost = e_new, per_new, bad_new, cost_new
            self.last_per = per
            multiplier = max(multiplier * SHRINK, 1.0)
            history.append(bad)
        return True

    def at_rest(self) -> bool:
        """Whether the model is in the T-pose (every coordinate 0, identity rotations)."""
        return not any(self.coords()) and all(
            q == (1.0, 0.0, 0.0, 0.0) for q in self.model.quats)

    def margin(self, x: Coords) -> float:
        """Smallest distance to a limit over the limited coordinates, as a fraction of
        their range (0.5: all at mid-range; 1 when nothing is limited)."""
        out = 1.0
        for v, a, b in zip(x, self.lo, self.hi, strict=True):
            if math.isfinite(a) and math.isfinite(b) and b > a:
                out = min(out, (v - a) / (b - a), (b - v) / (b - a))
        return out

    def posture(self, x: Coords, gain: float) -> Coords:
        """``x`` moved ``gain`` of the way to mid-range (coordinates with two limits)."""
        return [v + gain * (m - v) if m is not None else v
                for v, m in zip(x, self.mid, strict=True)]

    def window(self, c: int) -> float:
        """Half-width of the part of a wide box that restarts search: RESTART_WINDOW
        times pi (rad) or the chain's reach (m, prismatic)."""
        return RESTART_WINDOW * (self.scale if self.prismatic[c] else math.pi)

    def randomize(self, rng: np.random.Generator) -> None:
        """Every coordinate uniform within its box (unbounded: +-pi or +-scale m around
        it; a box wider than RESTART_WINDOW times that around the coordinate: that window
        of it, so limits of +-1e308 draw finite values near the chain's reach); free
        spherical joints a uniform random rotation; FK."""
        x = self.coords()
        lo, hi = self.lo, self.hi
        new = []
        for c in range(self.n):
            span = self.scale if self.prismatic[c] else math.pi
            a = lo[c] if math.isfinite(lo[c]) else min(x[c], hi[c]) - span
            b = hi[c] if math.isfinite(hi[c]) else max(x[c], lo[c]) + span
            wide = self.window(c)
            if not b - a <= 2 * wide:  # (b - a may overflow to inf)
                a, b = max(a, min(x[c], b) - wide), min(b, max(x[c], a) + wide)
            new.append(float(rng.uniform(a, b)))
        quats = list(self.model.quats)
        for s, _, boxed in self.sph:
            if not boxed:
                quats[s] = quat_unit(tuple(float(v) for v in rng.normal(size=4)))
        self.set_state(new, quats)

    def result(self, converged: bool, iterations: int, restarts: int,
               per: list[tuple[float, float]] | None = None) -> RobustResult:  # fmt: skip
        """The result for the current state (``per``: its errors, if measured)."""
        per = self.measure()[1] if per is None else per
        pe = max((p for (p, _), (wp, _) in zip(per, self.weights, strict=True) if wp > 0),
                 default=0.0)
        oe = max((o for (_, o), (_, wr) in zip(per, self.weights, strict=True) if wr > 0),
                 default=0.0)
        return RobustResult(converged, iterations, pe, oe, restarts, per)

    def solve(self, budget: int, restarts: int, rng: np.random.Generator | None,
              anchor: tuple[Coords, Sequence[Quat]] | None = None, chord: bool = False
              ) -> RobustResult:  # fmt: skip
        """One solve from the model's state; a stalled search restarts ``restarts`` times
        from random states (the best state reached is kept)."""
        # a cold solve from the T-pose starts at the interior point (the T-pose is singular
        # for many chains; in a box wider than the restarts' window the interior point is
        # the T-pose, clipped); its first restart is the T-pose clipped into the limits
        # with the whole budget: never worse than starting from the T-pose (issue 9, a
        # gantry with limits of +-1000 m)
        self.canonical()
        tpose_next = restarts > 0 and anchor is None and self.at_rest()
        rest = self.save() if tpose_next else None
        if tpose_next and self.measure()[2] >= 1.0:  # a T-pose on target is kept as it is
            self.set_state(self.interior, [(1.0, 0.0, 0.0, 0.0)] * len(self.sph))
            tpose_next = self.coords() != [min(max(0.0, a), b)
                                           for a, b in zip(self.lo, self.hi, strict=True)]
        else:
            tpose_next = False
        self.iterations = 0
        converged = self.run(budget, anchor, chord=chord)
        if converged or restarts <= 0 or self.n == 0:
            return self.result(converged, self.iterations, 0, self.last_per)
        rng = np.random.default_rng(self.options.seed) if rng is None else rng
        best = (self.measure()[2], self.save())
        used = 0
        while used < restarts and not converged:
            used += 1
            if tpose_next and rest is not None:
                self.restore(rest)
                self.canonical()  # (FK)
                tpose_next = False
                converged = self.run(budget)
            else:
                self.randomize(rng)
                converged = self.run(self.options.restart_iterations)
            bad = self.measure()[2]
            if converged or bad < best[0]:
                best = (bad, self.save())
        self.restore(best[1])
        return self.result(converged, self.iterations, used)




def engine_for(model: CoordinateModel, weights: Sequence[Weight] | None,
            settings: SolverSettings, options: RobustOptions) -> Engine:  # fmt: skip
    """The model's float engine for these settings (kept on the model between calls)."""
    key = (None if weights is None else tuple(map(tuple, weights)),
           settings.position_tolerance, settings.orientation_tolerance, options)
    cached = _ENGINES.get(model)
    if cached is not None and cached[0] == key:
        return cached[1]
    eng = Engine(model, weights, settings, options)
    _ENGINES[model] = (key, eng)
    return eng


# one engine per model and settings, kept between calls (a bake calls once per frame)
_ENGINES: WeakKeyDictionary[CoordinateModel, tuple[object, Engine]] = WeakKeyDictionary()




def solve_robust(
    model: CoordinateModel,
    targets: Sequence[ArrayLike],
    settings: SolverSettings | None = None,
    *,
    weights: Sequence[Weight] | None = None,
    rng: np.random.Generator | None = None,
    previous: object | None = None,
    options: RobustOptions | None = None,
) -> RobustResult:
    """Solve every effector of ``model`` toward its world 4x4 target (metres) at once.

    ``targets[k]`` belongs to ``model.effectors[k]``; ``weights[k]`` is its
    ``(position, orientation)`` weight (default ``(1, 1)``; 0 ignores that part, in the
    step and in convergence). Converged: every effector within
    ``settings.position_tolerance`` (m) and ``orientation_tolerance`` (rad). The solve
    starts from the model's current state (at most ``settings.max_iterations``).

    ``previous`` (a ``model.save()``, normally the previous frame's pose) makes it a
    trajectory step: pulled toward ``previous`` and mid-range in the null space, no
    restarts. A cold solve from the T-pose (which says nothing about the target and is
    singular for many chains) starts inside the limits, ``INTERIOR`` of the half-range
    above mid-range. Without ``previous``, a stalled solve restarts from random
    configurations within the limits (``options.max_restarts``) drawn from ``rng``
    (default ``default_rng(options.seed)``). The model is left in the best state found,
    FK current.
    """
    if not isinstance(model, CoordinateModel):
        raise TypeError("the robust method needs a compiled model (model.compiled)")
    settings = settings or SolverSettings()
    options = options or RobustOptions()
    eng = engine_for(model, weights, settings, options)
    anchor = None
    if previous is not None:
        now = model.save()
        model.restore(previous)
        eng.canonical()
        anchor = eng.anchor_of()
        model.restore(now)
    eng.set_targets(targets)
    return eng.solve(settings.max_iterations, 0 if previous else options.max_restarts,
                     rng, anchor)
