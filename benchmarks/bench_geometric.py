"""Benchmarks of geometric/: optimizer steps on St(N, 64) as N grows, and the Stiefel retractions."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric
from geometric import optim
from geometric._core.rotations import rotate
from rules.internal import householder_qr_factor

from ._harness import Table, fmt_ratio, fmt_time, interleaved, median_time
from ._peers import THREADS, Peers, alternate_many

RETRACTIONS = ("qr", "polar", "cayley", "exp")


def _rand(shape, seed, dtype):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _optimizers(n, p):
    rows = [(f"riemannian_adam, {r}", geometric.Stiefel(n, p, retraction=r),
             lambda m: optim.riemannian_adam(1e-3, m)) for r in RETRACTIONS]
    rows += [(f"manifold_adam, {r}", geometric.Stiefel(n, p),
              lambda m, r=r: optim.manifold_adam(1e-3, m, retraction=r)) for r in ("cayley", "exp")]
    return rows


def _step_time(make_opt, manifold, repeats):
    """Median time of one jitted ``update`` + ``apply_updates`` (gradient given, not computed)."""
    opt = make_opt(manifold)
    y = manifold.random_point(jax.random.PRNGKey(0))
    g = _rand(y.shape, 1, y.dtype)
    state = opt.init(y)

    @jax.jit
    def step(y, g, state):
        updates, state = opt.update(g, state, y)
        return optax.apply_updates(y, updates), state

    return median_time(step, y, g, state, repeats=repeats)


def _stored_complement_time(n, p, repeats):
    """What keeping λ = [Y, Y⊥] ∈ O(N) costs at least: rotating it by the low-rank Q each step."""
    lam = geometric.Orthogonal(n).random_point(jax.random.PRNGKey(0))
    w = 1e-3 * _rand((n, p), 1, jnp.float32)
    update = jax.jit(lambda lam, w: rotate(lam[:, :p], w, "cayley", z=lam[:, p:]))
    return median_time(update, lam, w, repeats=repeats, min_time=0.0)


def _scaling_table(quick: bool) -> Table:
    p = 16 if quick else 64
    ns = [128, 512] if quick else [512, 2048, 8192]
    repeats = 3 if quick else 10
    columns = ["optimizer, retraction"] + [f"N = {n}" for n in ns] + [
        f"×{b // a} N: {a}→{b}" for a, b in zip(ns, ns[1:])]
    table = Table(f"One optimizer step on St(N, {p}) (float32, jitted)", columns)
    per_n = [_optimizers(n, p) for n in ns]
    for i, (label, _, _) in enumerate(per_n[0]):
        times = [_step_time(rows[i][2], rows[i][1], repeats) for rows in per_n]
        table.rows.append([label] + [fmt_time(t) for t in times]
                          + [f"{b / a:.1f}" for a, b in zip(times, times[1:])])
    times = [_stored_complement_time(n, p, 2) for n in ns]
    table.rows.append(["(stored Y⊥: rotating λ ∈ O(N) alone)"] + [fmt_time(t) for t in times]
                      + [f"{b / a:.1f}" for a, b in zip(times, times[1:])])
    table.notes += [
        "Time of `update` + `optax.apply_updates` with a given Euclidean gradient; the growth "
        "columns are time ratios for 4× N (goal ≤ 5: linear in N; an O(N²p) or O(N³) step "
        "grows 16× or 64×).",
        "`manifold_adam` keeps no complement Y⊥ (O(Np²) per step). The last row is the least a "
        "stored Y⊥ would add: the low-rank rotation applied to the N×N frame λ, O(N²p) "
        "(GeometricMachineLearning.jl multiplies N×N matrices, O(N³)).",
        "Steps that re-project (every 100th for Cayley/exp) are not in the median.",
    ]
    return table


def _peer_step(make_opt, manifold, batch, n, p):
    """A jitted ``update`` + ``apply_updates`` and its arguments, as :func:`_step_time`'s."""
    opt = make_opt(manifold)
    y = jnp.asarray(np.linalg.qr(np.random.default_rng(0).standard_normal((*batch, n, p)))[0],
                    jnp.float32)
    g = _rand(y.shape, 1, y.dtype)

    @jax.jit
    def step(y, g, state):
        updates, state = opt.update(g, state, y)
        return optax.apply_updates(y, updates), state

    return step, (y, g, opt.init(y))


# Our optimizers in the geoopt table, by name: also what ``_pinned_worker.py`` builds.
PEER_OPTIMIZERS = {"riemannian_adam": lambda m: optim.riemannian_adam(1e-3, m),
                   "riemannian_sgd": lambda m: optim.riemannian_sgd(1e-3, m),
                   "manifold_adam": lambda m: optim.manifold_adam(1e-3, m)}


def _geoopt_table(quick: bool) -> Table | None:
    peers = Peers.start()
    if peers is None:
        return None
    pinned = Peers.start_ours_on_one_core()
    try:
        p = 16 if quick else 64
        sizes = [((), 128, p), ((), 512, p), ((16,), 32, 8)] if quick else [
            ((), 512, p), ((), 2048, p), ((), 8192, p), ((64,), 64, 16)]
        labels = [f"St({n}, {q})" if not b else f"{b[0]} × St({n}, {q})" for b, n, q in sizes]
        # Each peer against our optimizers of its kind (Adam with Adam), in one alternation.
        kinds = {"RiemannianAdam": ("riemannian_adam", "manifold_adam"),
                 "RiemannianSGD": ("riemannian_sgd",)}
        table = Table("One optimizer step against geoopt (float32, CPU)",
                      ["optimizer"] + labels)
        times: dict[str, list[float]] = {name: [] for name in PEER_OPTIMIZERS}
        one_core: dict[str, list[float]] = {name: [] for name in PEER_OPTIMIZERS}
        peer_times: dict[str, list[dict[int, float]]] = {name: [] for name in kinds}
        budget = 0.1 if quick else 0.4
        for batch, n, q in sizes:
            manifold = geometric.Stiefel(n, q)
            for peer_name, names in kinds.items():
                case = peers.setup(peer_name, batch=list(batch), n=n, p=q)
                steps = [_peer_step(PEER_OPTIMIZERS[name], manifold, batch, n, q) for name in names]
                pinned_cases = [pinned.setup(name, batch=list(batch), n=n, p=q) for name in names]
                t_ours, t_peer, t_one = alternate_many(
                    peers, case, [s for s, _ in steps], [a for _, a in steps],
                    rounds=3 if quick else 6, budget=budget, pinned=(pinned, pinned_cases))
                for name, t, t1 in zip(names, t_ours, t_one):
                    times[name].append(t)
                    one_core[name].append(t1)
                peer_times[peer_name].append(t_peer)
        for name in PEER_OPTIMIZERS:
            table.rows.append([f"ours: `{name}` (2 / 1 cores)"] + [
                f"{fmt_time(t)} / {fmt_time(t1)}" for t, t1 in zip(times[name], one_core[name])])
        for name, ts in peer_times.items():
            table.rows.append([f"geoopt `{name}` (1 / 2 threads)"] + [
                " / ".join(fmt_time(t[k]) for k in THREADS) for t in ts])
        best = {k: [min(t.values()) for t in v] for k, v in peer_times.items()}
        for name, peer in (("riemannian_adam", "RiemannianAdam"),
                           ("riemannian_sgd", "RiemannianSGD"),
                           ("manifold_adam", "RiemannianAdam")):
            table.rows.append([f"ratio `{name}` / geoopt `{peer}` (2 / 1 cores)"] + [
                f"{a / b:.2f} / {a1 / b:.2f}"
                for a, a1, b in zip(times[name], one_core[name], best[peer])])
        table.notes += [
            "One step with a given Euclidean gradient: ours `update` + `optax.apply_updates` "
            "(jitted, default retraction of `geometric.Stiefel`: QR), geoopt `opt.step()` on a "
            "`ManifoldParameter` of `geoopt.EuclideanStiefel` (QR retraction) whose `.grad` is "
            f"set. geoopt {peers.versions['geoopt']}, PyTorch {peers.versions['torch']} (CPU) in "
            "their own process, alternated with ours (both Adams with geoopt's Adam, SGD with "
            "SGD; six rounds, 0.4 s per side each); the faster of 1 and 2 PyTorch threads counts "
            "as geoopt's time.",
            "Ours on 2 cores: this process, as a user runs JAX. On 1 core: the same steps in a "
            "process pinned to one core before JAX starts (`benchmarks/_pinned_worker.py`; a user "
            "gets it with `taskset -c 0` or `os.sched_setaffinity`), timed in the same rounds: "
            "XLA:CPU then runs every fused loop and product on one thread, with no hand-offs "
            "between cores: the same choice PyTorch's thread count gives geoopt.",
            "Goal: every ratio ≤ 1.0 (a step of ours at least as fast as geoopt's).",
        ]
        return table
    finally:
        peers.close()
        pinned.close()


def _dense_cayley(y, v):
    n = y.shape[0]
    q = jnp.eye(n, dtype=y.dtype) - 0.5 * y @ y.T
    w = q @ v @ y.T - y @ v.T @ q
    eye = jnp.eye(n, dtype=y.dtype)
    return jnp.linalg.solve(eye - 0.5 * w, (eye + 0.5 * w) @ y)


def _dense_exp(y, v):
    n = y.shape[0]
    q = jnp.eye(n, dtype=y.dtype) - 0.5 * y @ y.T
    return jax.scipy.linalg.expm(q @ v @ y.T - y @ v.T @ q) @ y


def _retraction_table(quick: bool) -> Table:
    n, p = (400, 10) if quick else (2000, 50)
    repeats = 3 if quick else 15
    dtypes = (jnp.float32, jnp.float64)
    table = Table(f"Stiefel retractions on St({n}, {p})",
                  ["retraction", "float32", "float64", "‖YᵀY − I‖_F (float32)"])
    rows = [(r, jax.jit(geometric.Stiefel(n, p, retraction=r).retract)) for r in RETRACTIONS]
    rows += [("qr by Householder QR (as before CholeskyQR)",
              jax.jit(lambda y, v: householder_qr_factor(y + v))),
             ("cayley, dense n×n solve", jax.jit(_dense_cayley)),
             ("exp, dense n×n expm", jax.jit(_dense_exp))]
    for label, fn in rows:
        cells, error = [], ""
        for dtype in dtypes:
            st = geometric.Stiefel(n, p)
            y = st.random_point(jax.random.PRNGKey(0), dtype)
            v = st.project(y, _rand((n, p), 1, dtype)) * (0.3 / math.sqrt(n))
            dense = "dense" in label
            cells.append(fmt_time(median_time(fn, y, v, repeats=2 if dense else repeats,
                                              min_time=0.0 if dense else 0.2)))
            if dtype == jnp.float32:
                error = f"{float(st.manifold_error(fn(y, v))):.1e}"
        table.rows.append([label, *cells, error])
    table.notes += [
        "A tangent step of norm ≈ 0.3. Low-rank Cayley and exp never form an n×n array: N×2p "
        "factors and a 2p×2p solve (Cayley) or φ of a 2p×2p matrix (exp). The dense rows are "
        "the same maps with n×n matrices (Wen & Yin report 361 ms dense vs 3.1 ms low rank for "
        "Cayley on St(2000, 50)).",
        "`qr` is CholeskyQR of the well-conditioned Y + V (the same Q factor); the Householder "
        "row is the QR retraction as computed before.",
    ]
    return table


def _checked_step(make_opt, manifold, batch=()):
    """A jitted ``update`` + ``apply_updates`` with a given gradient, and its arguments."""
    opt = make_opt(manifold)
    keys = jax.random.split(jax.random.PRNGKey(0), math.prod(batch)).reshape(*batch, -1)
    y = jnp.vectorize(manifold.random_point, signature="(k)->" + "(" + ",".join(
        f"d{i}" for i in range(len(manifold.shape))) + ")")(keys) if batch else \
        manifold.random_point(jax.random.PRNGKey(0))
    g = 1e-3 * _rand(y.shape, 1, y.dtype)

    @jax.jit
    def step(y, g, state):
        updates, state = opt.update(g, state, y)
        return optax.apply_updates(y, updates), state

    return step, (y, g, opt.init(y))


class _NoDomain:
    """``m`` with its domain check (nan outside the domain) switched off, for the A/B rows."""

    def __init__(self, m):
        self.cls = type(m)
        self.hook = self.cls._outside

    def __enter__(self):
        self.cls._outside = lambda self, x: None

    def __exit__(self, *exc):
        self.cls._outside = self.hook


def _checks_table(quick: bool) -> Table:
    n, p = (256, 16) if quick else (2048, 64)
    table = Table("What the safety checks cost: one optimizer step with them / without",
                  ["optimizer, manifold", "with", "without", "ratio"])
    point_checks = [
        (f"riemannian_adam, St({n}, {p})", geometric.Stiefel(n, p), optim.riemannian_adam),
        (f"manifold_adam, St({n}, {p})", geometric.Stiefel(n, p), optim.manifold_adam),
        ("riemannian_adam, St(64, 8)", geometric.Stiefel(64, 8), optim.riemannian_adam),
    ]
    for label, m, make in point_checks:
        on = _checked_step(lambda m: make(1e-3, m), m)
        off = _checked_step(lambda m: make(1e-3, m, check_points=False), m)
        (t_on, t_off), ratio = interleaved([on[0], off[0]], [on[1], off[1]],
                                           budget=0.3 if quick else 1.5)
        table.rows.append([f"{label}: check_points", fmt_time(t_on), fmt_time(t_off),
                           fmt_ratio(ratio)])
    domain_checks = [("riemannian_adam, SPD(32)", geometric.SPD(32), ()),
                     ("riemannian_adam, PoincareBall(16), 4096 points", geometric.PoincareBall(16),
                      (4096,))]
    for label, m, batch in domain_checks:
        on = _checked_step(lambda m: optim.riemannian_adam(1e-3, m, check_points=False), m, batch)
        with _NoDomain(m):
            off = _checked_step(lambda m: optim.riemannian_adam(1e-3, m, check_points=False), m,
                                batch)
            jax.block_until_ready(off[0](*off[1]))  # traced and compiled without the check
        (t_on, t_off), ratio = interleaved([on[0], off[0]], [on[1], off[1]],
                                           budget=0.3 if quick else 1.5)
        table.rows.append([f"{label}: domain (nan outside)", fmt_time(t_on), fmt_time(t_off),
                           fmt_ratio(ratio)])
    table.notes += [
        "`check_points` (the default): `init` refuses a start off the manifold, and each update "
        "compares 64 entries per manifold leaf with where the last one put them, behind one "
        "condition per update (a callback runs only on failure). The domain rows: the methods' "
        "nan for points outside the manifold's domain (a Cholesky factorisation for SPD, a norm "
        "for the ball), against the same step compiled without it.",
        "Median of per-round ratios, sides alternated; compare with the noise floor of this run "
        "(JAX's program timed against itself): a ratio inside it is parity.",
    ]
    return table


def tables(quick: bool) -> list[Table]:
    peers = _geoopt_table(quick)
    return ([_scaling_table(quick)] + ([peers] if peers else []) + [_retraction_table(quick),
            _checks_table(quick)])
