"""The rule test kit: check a pullback or pushforward against finite differences.

What ``ChainRulesTestUtils.test_rrule`` does for Julia, for JAX rules (ours and users' own):

* inputs are cast up to float64/complex128 and the check runs with 64-bit types enabled;
* a random output cotangent ``ȳ`` is drawn and the pullback's ``x̄`` is compared, entry by entry, with
  central finite differences (Richardson-extrapolated) of ``φ(x) = Re Σ ȳ ⊙ f(x)``;
  for complex inputs both the real and the imaginary direction are checked;
* the returned cotangents must have the structure, shape and dtype of the arguments;
* ``jax.jit(f)`` and ``jax.vmap(f)`` must give the same values and cotangents as ``f``;
* forward mode (``jax.jvp``, which runs a rule's explicit pushforward) is checked against finite
  differences and against the pullback through the dot-product identity ``<ȳ, J ẋ> = <Jᵀȳ, ẋ>``,
  under ``jit`` and ``vmap`` too — for every function that has forward mode (all but an
  :func:`rules.rrule` without a registered pushforward).

JAX's convention for complex cotangents is used throughout: the cotangent pairs with a tangent
through ``Re Σ x̄ ⊙ ẋ`` (no conjugation), so ``x̄ = ∂φ/∂Re x - i ∂φ/∂Im x``.

Array leaves of the arguments (any pytree) with a float or complex dtype are differentiated;
integer arrays are held fixed but still batched by the ``vmap`` check; everything else (strings,
Python numbers, ``None``) is passed through as a static value.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._core.rrule import user_rule_of

__all__ = ["check_frule", "check_rrule"]


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def _is_diff(x) -> bool:
    return _is_array(x) and jnp.issubdtype(x.dtype, jnp.inexact)


def _upcast(x):
    if not _is_array(x):
        return x
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jnp.asarray(x, jnp.complex128)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.asarray(x, jnp.float64)
    return jnp.asarray(x)


def _random_like(rng: np.random.Generator, x) -> jax.Array:
    """Standard normal entries (real and imaginary parts) of ``x``'s shape and dtype."""
    v = rng.standard_normal(x.shape)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        v = v + 1j * rng.standard_normal(x.shape)
    return jnp.asarray(v, x.dtype)


def _pair(a, b) -> float:
    """JAX's bilinear pairing of cotangents with tangents, ``Re Σ a ⊙ b``, summed over pytrees."""
    total = 0.0
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        total += float(jnp.real(jnp.sum(jnp.asarray(x) * jnp.asarray(y))))
    return total


class _Problem:
    """``f`` with its arguments split into differentiable leaves, other array leaves and statics."""

    def __init__(self, f: Callable, args: tuple, fkwargs: dict):
        self.f, self.fkwargs = f, fkwargs
        leaves_with_paths, self.treedef = jax.tree_util.tree_flatten_with_path(tuple(args))
        leaves = [_upcast(leaf) for _, leaf in leaves_with_paths]
        self.leaves = leaves
        self.diff_idx = [i for i, leaf in enumerate(leaves) if _is_diff(leaf)]
        self.array_idx = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
        self.names = {i: "argument" + jax.tree_util.keystr(path).replace("[", " [", 1)
                      for i, (path, _) in enumerate(leaves_with_paths)}
        if not self.diff_idx:
            raise ValueError("check_rrule: no argument has a float or complex array to differentiate.")

    def args_with(self, values: dict[int, Any]) -> tuple:
        leaves = [values.get(i, leaf) for i, leaf in enumerate(self.leaves)]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def of_diff(self, *diff):
        """``f`` as a function of the differentiable leaves only."""
        return self.f(*self.args_with(dict(zip(self.diff_idx, diff))), **self.fkwargs)

    def of_arrays(self, *arrays):
        """``f`` as a function of every array leaf (for ``jit`` and ``vmap``)."""
        return self.f(*self.args_with(dict(zip(self.array_idx, arrays))), **self.fkwargs)

    @property
    def diff_leaves(self) -> list:
        return [self.leaves[i] for i in self.diff_idx]

    @property
    def arrays(self) -> list:
        return [self.leaves[i] for i in self.array_idx]

    def _of_diff_given(self, arrays):
        """``f`` of the differentiable leaves, the other array leaves taken from ``arrays``."""
        diff_pos = [self.array_idx.index(i) for i in self.diff_idx]

        def of_diff(*diff):
            full = list(arrays)
            for p, d in zip(diff_pos, diff):
                full[p] = d
            return self.of_arrays(*full)

        return of_diff, [arrays[p] for p in diff_pos]

    def value_and_pullback(self, arrays, out_bar):
        """``(f(args), x̄)`` as a function of every array leaf and the output cotangent."""
        of_diff, diff = self._of_diff_given(arrays)
        out, vjp_fn = jax.vjp(of_diff, *diff)
        return out, vjp_fn(out_bar)

    def value_and_pushforward(self, arrays, diff_tangents):
        """``(f(args), J ẋ)`` by ``jax.jvp``, as a function of every array leaf and the tangents."""
        of_diff, diff = self._of_diff_given(arrays)
        return jax.jvp(of_diff, tuple(diff), tuple(diff_tangents))


def _central_difference(phi: Callable, x: jax.Array, direction: jax.Array, eps: float):
    """Richardson-extrapolated central difference of ``phi`` at ``x`` along ``direction``.

    ``phi`` returns a float or a list of NumPy arrays. Truncation error O(h⁴) instead of O(h²), so
    a step of ``eps`` (relative to ``|x|``) keeps truncation and round-off near 1e-12 in float64.
    """
    h = eps * max(1.0, float(jnp.max(jnp.abs(x))) if x.size else 1.0)

    def d(step):
        plus, minus = phi(x + step * direction), phi(x - step * direction)
        if isinstance(plus, list):
            return [(p - m) / (2 * step) for p, m in zip(plus, minus)]
        return (plus - minus) / (2 * step)

    coarse, fine = d(h), d(h / 2)
    if isinstance(coarse, list):
        return [(4 * b - a) / 3 for a, b in zip(coarse, fine)]
    return (4 * fine - coarse) / 3


def _sample_entries(size: int, max_entries: int, rng: np.random.Generator) -> np.ndarray:
    if size <= max_entries:
        return np.arange(size)
    return np.sort(rng.choice(size, max_entries, replace=False))


def _compare(what: str, name: str, shape, got: np.ndarray, want: np.ndarray, flat_idx: np.ndarray,
             rtol: float, atol: float) -> None:
    """Entry-wise check, tolerance relative to the largest reference entry of this argument."""
    err = np.abs(got - want)
    tol = atol + rtol * max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    if np.all(err <= tol):
        return
    k = int(np.argmax(err - tol))
    idx = np.unravel_index(flat_idx[k], shape) if shape else ()
    raise AssertionError(
        f"{what} of {name} (shape {tuple(shape)}) disagrees with finite differences: worst index "
        f"{tuple(int(i) for i in idx)}: got {got[k]:.12g}, finite differences {want[k]:.12g}, "
        f"|error| {err[k]:.3g} > tolerance {tol:.3g} (max |error| {np.max(err):.3g}, "
        f"{int(np.sum(err > tol))} of {len(err)} checked entries fail).")


def _assert_close(what: str, got, want, rtol: float) -> None:
    for path_leaf, w in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree_util.tree_leaves(want)):
        path, g = path_leaf
        g, w = np.asarray(g), np.asarray(w)
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1.0)
        err = np.max(np.abs(g - w), initial=0.0)
        if not err <= rtol * scale:
            raise AssertionError(f"{what}{jax.tree_util.keystr(path)}: max |difference| {err:.3g} "
                                 f"exceeds {rtol:.1g} × {scale:.3g}.")


def _check_cotangent_types(problem: _Problem, cotangents) -> None:
    for i, ct in zip(problem.diff_idx, cotangents):
        primal = problem.leaves[i]
        if ct is None or not hasattr(ct, "shape"):
            raise AssertionError(f"pullback: cotangent of {problem.names[i]} is {ct!r}, expected an "
                                 f"array of shape {primal.shape}.")
        if ct.shape != primal.shape or ct.dtype != primal.dtype:
            raise AssertionError(f"pullback: cotangent of {problem.names[i]} has shape {ct.shape} and "
                                 f"dtype {ct.dtype}; expected {primal.shape} and {primal.dtype}.")


def _batch_of_two(problem: _Problem, rng: np.random.Generator, spread: float):
    """Two argument sets: the given one and a perturbed copy, stacked on a new leading axis."""
    stacked = []
    for i in problem.array_idx:
        x = problem.leaves[i]
        y = x + spread * _random_like(rng, x) if _is_diff(x) else x
        stacked.append(jnp.stack([x, y]))
    return stacked


def check_rrule(f: Callable, *args: Any, fkwargs: dict | None = None, rtol: float = 1e-7,
                atol: float = 1e-10, eps: float = 1e-3, max_entries: int = 200, seed: int = 0,
                check_jit: bool = True, check_vmap: bool = True, vmap_spread: float = 1e-2) -> None:
    """Check the pullback (and pushforward, if registered) of ``f`` at ``args`` in float64.

    Args:
      f: a function of ``args``: a rule of this library, an ``rrule``/``custom_vjp`` function of
        your own, or any differentiable JAX function.
      *args: its arguments (arrays or pytrees of arrays; other values are passed through).
      fkwargs: keyword arguments of ``f`` (static values, such as ``mode="r"``).
      rtol, atol: an entry passes when ``|pullback - fd| ≤ atol + rtol · max|fd|`` (maximum over that
        argument's checked entries).
      eps: finite-difference step, relative to the largest entry of the argument.
      max_entries: per argument, at most this many entries are checked one by one (a random
        sample beyond that); the dot-product identity still covers every entry.
      seed: seed of the random cotangent, tangent and sample.
      check_jit, check_vmap: also compare ``jax.jit(f)`` and ``jax.vmap(f)`` (batch of two).
      vmap_spread: size of the perturbation of the second batch element.

    Raises:
      AssertionError: naming the argument, the worst entry and the errors.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [0.5, 3.0]])
      >>> rules.testing.check_rrule(rules.inv, a)
    """
    fkwargs = dict(fkwargs or {})
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        problem = _Problem(f, args, fkwargs)
        out = jax.eval_shape(problem.of_diff, *problem.diff_leaves)
        for leaf in jax.tree_util.tree_leaves(out):
            if not jnp.issubdtype(leaf.dtype, jnp.inexact):
                raise ValueError(f"check_rrule: output of dtype {leaf.dtype} cannot be differentiated.")
        out_bar = jax.tree_util.tree_map(lambda y: _random_like(rng, y), out)
        # Everything below runs compiled, so a check costs a handful of compilations; the jit
        # check compares with one eager (op-by-op) run.
        value_and_pullback = jax.jit(problem.value_and_pullback)
        _, cotangents = value_and_pullback(problem.arrays, out_bar)
        _check_cotangent_types(problem, cotangents)

        phi = jax.jit(lambda *diff: sum(jnp.real(jnp.sum(y * w)) for y, w in zip(
            jax.tree_util.tree_leaves(problem.of_diff(*diff)), jax.tree_util.tree_leaves(out_bar))))
        for k, (i, ct) in enumerate(zip(problem.diff_idx, cotangents)):
            x = problem.diff_leaves[k]

            def phi_k(xk, k=k):
                diff = list(problem.diff_leaves)
                diff[k] = xk
                return float(phi(*diff))

            entries = _sample_entries(x.size, max_entries, rng)
            parts: list[tuple[str, complex, Callable]] = [("real", 1.0, np.real)]
            if jnp.iscomplexobj(x):
                parts.append(("imaginary", 1j, lambda c: -np.imag(c)))
            ct_flat = np.asarray(ct).reshape(-1)
            for label, unit, read in parts:
                fd = np.empty(len(entries))
                for j, e in enumerate(entries):
                    direction = jnp.zeros(x.size, x.dtype).at[e].set(unit).reshape(x.shape)
                    fd[j] = _central_difference(phi_k, x, direction, eps)
                what = "pullback" if label == "real" else "pullback (imaginary direction)"
                _compare(what, problem.names[i], x.shape, read(ct_flat[entries]), fd, entries,
                         rtol, atol)

        # Dot-product identity over every entry at once: <x̄, ẋ> = d/dt φ(x + t ẋ).
        tangents = [_random_like(rng, x) for x in problem.diff_leaves]
        along = _central_difference(
            lambda t: float(phi(*[x + t.astype(x.dtype) * v
                                  for x, v in zip(problem.diff_leaves, tangents)])),
            jnp.zeros((), jnp.float64), jnp.ones((), jnp.float64), eps)
        _compare("dot-product identity <x̄, ẋ> of the pullback", "all arguments", (),
                 np.array([_pair(cotangents, tangents)]), np.array([along]), np.array([0]), rtol, atol)

        if check_jit:
            eager_out, eager_cts = problem.value_and_pullback(problem.arrays, out_bar)
            _assert_close("jit(f) differs from f: output", value_and_pullback(
                problem.arrays, out_bar)[0], eager_out, 1e-10)
            _assert_close("jit of the pullback differs from the eager pullback: cotangent",
                          cotangents, eager_cts, 1e-10)

        if check_vmap:
            _check_vmap(problem, value_and_pullback, rng, vmap_spread)

        _check_pushforward(problem, rng, rtol, atol, eps, out_bar=out_bar, cotangents=cotangents,
                           check_jit=check_jit, check_vmap=check_vmap, vmap_spread=vmap_spread,
                           required=False)


def _check_vmap(problem: _Problem, value_and_pullback: Callable, rng: np.random.Generator,
                spread: float) -> None:
    stacked = _batch_of_two(problem, rng, spread)
    out_shape = jax.eval_shape(problem.of_arrays, *problem.arrays)
    out_bars = [jax.tree_util.tree_map(lambda y: _random_like(rng, y), out_shape) for _ in range(2)]
    batched_out_bar = jax.tree_util.tree_map(lambda *ys: jnp.stack(ys), *out_bars)
    batched = jax.jit(jax.vmap(problem.value_and_pullback))(stacked, batched_out_bar)
    for b in range(2):
        single = value_and_pullback([s[b] for s in stacked], out_bars[b])
        element = jax.tree_util.tree_map(lambda y: y[b], batched)
        _assert_close(f"vmap(f) differs from f at batch element {b}: output", element[0], single[0],
                      1e-10)
        _assert_close(f"vmap of the pullback differs at batch element {b}: cotangent", element[1],
                      single[1], 1e-10)


def _check_pushforward(problem: _Problem, rng: np.random.Generator, rtol: float, atol: float,
                       eps: float, out_bar=None, cotangents=None, check_jit: bool = True,
                       check_vmap: bool = True, vmap_spread: float = 1e-2,
                       required: bool = True) -> None:
    """``jax.jvp`` of ``f`` against finite differences, the pullback, ``jit`` and ``vmap``.

    Unless ``required``, a function without forward mode (one that calls an ``rrule`` with a
    pullback only) is skipped.
    """
    name = getattr(problem.f, "__name__", repr(problem.f))
    diff_tangents = [_random_like(rng, x) for x in problem.diff_leaves]
    value_and_pushforward = jax.jit(problem.value_and_pushforward)
    try:
        out, out_dot = value_and_pushforward(problem.arrays, diff_tangents)
    except TypeError as e:
        if required or not ("forward-mode" in str(e) or "no forward mode" in str(e)):
            raise
        return
    expected = jax.jit(problem.of_diff)(*problem.diff_leaves)
    _assert_close(f"jvp({name}): primal output differs from {name}: output", out, expected, 1e-10)

    out_leaves, out_tree = jax.tree_util.tree_flatten(expected)
    dot_leaves = jax.tree_util.tree_leaves(out_dot)
    dot_tree = jax.tree_util.tree_structure(out_dot)
    if len(dot_leaves) != len(out_leaves) or dot_tree != out_tree:  # type: ignore[operator]
        raise AssertionError(f"jvp({name}): tangent structure {dot_tree} "
                             f"differs from the output's {out_tree}.")
    along = jax.jit(lambda t: jax.tree_util.tree_leaves(problem.of_diff(
        *[x + t.astype(x.dtype) * v for x, v in zip(problem.diff_leaves, diff_tangents)])))
    fd_all = _central_difference(lambda t: [np.asarray(y) for y in along(t)],
                                 jnp.zeros((), jnp.float64), jnp.ones((), jnp.float64), eps)
    for j, (y, ydot, fd) in enumerate(zip(out_leaves, dot_leaves, fd_all)):
        if ydot.shape != y.shape or ydot.dtype != y.dtype:
            raise AssertionError(f"jvp({name}): tangent of output {j} has shape {ydot.shape} and "
                                 f"dtype {ydot.dtype}; expected {y.shape} and {y.dtype}.")
        entries = np.arange(y.size)
        parts = [(np.real, "real part")] + ([(np.imag, "imaginary part")] if jnp.iscomplexobj(y) else [])
        for read, label in parts:
            _compare(f"pushforward ({label})", f"output {j} of {name}", y.shape,
                     read(np.asarray(ydot).reshape(-1)), read(fd.reshape(-1)), entries, rtol, atol)

    if out_bar is not None:
        lhs = _pair(out_bar, out_dot)
        rhs = _pair(cotangents, diff_tangents)
        tol = atol + rtol * max(abs(lhs), abs(rhs), 1.0)
        if not abs(lhs - rhs) <= tol:
            raise AssertionError(f"the pushforward and the pullback of {name} break the dot-product "
                                 f"identity: <ȳ, J ẋ> = {lhs:.12g} but <Jᵀȳ, ẋ> = {rhs:.12g}.")

    if check_jit:
        eager = problem.value_and_pushforward(problem.arrays, diff_tangents)
        _assert_close("jit of the pushforward differs from the eager pushforward: tangent",
                      out_dot, eager[1], 1e-10)

    if check_vmap:
        stacked = _batch_of_two(problem, rng, vmap_spread)
        tangents = [[_random_like(rng, x) for x in problem.diff_leaves] for _ in range(2)]
        batched_tangents = [jnp.stack(ts) for ts in zip(*tangents)]
        batched = jax.jit(jax.vmap(problem.value_and_pushforward))(stacked, batched_tangents)
        for b in range(2):
            single = value_and_pushforward([x[b] for x in stacked], tangents[b])
            element = jax.tree_util.tree_map(lambda y: y[b], batched)
            _assert_close(f"vmap of the pushforward differs at batch element {b}: tangent",
                          element[1], single[1], 1e-10)


def check_frule(f: Callable, *args: Any, fkwargs: dict | None = None, rtol: float = 1e-7,
                atol: float = 1e-10, eps: float = 1e-3, seed: int = 0, check_jit: bool = True,
                check_vmap: bool = True) -> None:
    """Check forward mode through ``f`` (``jax.jvp``) at ``args`` in float64.

    For a rule, ``jax.jvp`` runs its explicit pushforward (every rule of this library has one; an
    :func:`rules.rrule` gets one from :func:`rules.register_frule`). Checked against finite
    differences, against ``f``'s reverse mode through the dot-product identity
    ``<ȳ, J ẋ> = <Jᵀȳ, ẋ>``, and under ``jit`` and ``vmap``. Tolerances as in :func:`check_rrule`.

    Raises:
      TypeError: ``f`` is an ``rrule`` without a registered pushforward (the message shows how to
        register one).
      AssertionError: naming the output, the worst entry and the errors.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> rules.testing.check_frule(rules.qr, jnp.array([[2.0, 1.0], [0.5, 3.0], [1.0, 1.0]]))
    """
    user_rule = user_rule_of(f)
    if user_rule is not None and user_rule.pushforward is None:
        raise TypeError(f"check_frule: {user_rule.no_pushforward('has')}")
    rng = np.random.default_rng(seed)
    with jax.enable_x64(True):
        problem = _Problem(f, args, dict(fkwargs or {}))
        out = jax.eval_shape(problem.of_diff, *problem.diff_leaves)
        out_bar = jax.tree_util.tree_map(lambda y: _random_like(rng, y), out)
        _, cotangents = jax.jit(problem.value_and_pullback)(problem.arrays, out_bar)
        _check_pushforward(problem, rng, rtol, atol, eps, out_bar=out_bar, cotangents=cotangents,
                           check_jit=check_jit, check_vmap=check_vmap)
