r"""One way to define a rule: a forward, an explicit pushforward and an explicit pullback.

JAX offers two ways to give a function derivatives of our own, and neither keeps both:
``jax.custom_vjp`` has no forward mode (``jax.jvp`` raises), and ``jax.custom_jvp`` alone derives
the reverse rule by transposing the pushforward, so a hand-written pullback is never used.
:class:`Rule` pairs them the way JAX's own linear-algebra primitives do (``jax/_src/lax/linalg.py``):

* the rule is a ``jax.custom_jvp`` function whose JVP computes the primal output and its residuals
  with ``forward``, then the output tangent with a *linear primitive* of the rule's own,
  ``<name>_pushforward``, applied to the residuals and the input tangents;
* that primitive evaluates ``pushforward`` (forward mode: ``jax.jvp``, ``jax.jacfwd``,
  ``jax.linearize``), and JAX's transpose of it is ``pullback`` (reverse mode: ``jax.grad``,
  ``jax.vjp``, ``jax.jacrev``) — registered in ``ad.primitive_transposes``, so reverse mode runs
  the explicit pullback and never a transpose JAX derives;
* ``vmap`` of the primitive records the batch axes and evaluates ``pushforward`` (or transposes
  to ``pullback``) under ``jax.vmap``: residuals without a batch axis stay unbatched (a shared
  weight is not copied per tangent), and the cotangent of an unbatched tangent is summed over the
  batch;
* the primitive's own JVP, needed only for derivatives of order two and higher, is the primitive
  again in its tangent argument plus JAX's derivative of ``pushforward`` in the residuals.

Zero tangents are symbolic: ``pushforward`` receives ``None`` for an argument whose tangent is
known to be zero (every argument ``jax.jvp`` is not asked to differentiate, e.g. the other
operands of ``jax.jacfwd(f, argnums=0)``), and the primitive is not evaluated at all when every
tangent is zero. ``pullback`` may likewise return ``None`` for a zero cotangent.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

import jax
import jax.numpy as jnp
from jax.api_util import debug_info
from jax.custom_derivatives import SymbolicZero
from jax.extend import linear_util as lu
from jax.extend.core import Primitive, set_current_trace, take_current_trace
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as pe

__all__ = ["Rule"]

Forward = Callable[..., tuple[Any, Any]]
Pushforward = Callable[..., Any]
Pullback = Callable[..., tuple[Any, ...]]

class Rule:
    """A function with an explicit pushforward and an explicit pullback, for every JAX transform.

    Args:
      name: the rule's name (unique); the linear primitive is ``f"{name}_pushforward"``.
      forward: ``forward(*args, **static) -> (out, residuals)``. ``args`` are arrays or pytrees of
        arrays (the differentiable arguments), ``static`` hashable keyword arguments (modes,
        flags). ``residuals`` is a pytree of arrays: everything ``pushforward`` and ``pullback``
        need of the primal computation.
      pushforward: ``pushforward(residuals, *arg_tangents, **static) -> out_tangent``, linear in
        the tangents, with the structure, shapes and dtypes of ``out``. A tangent is ``None`` when
        it is zero (not every tangent is: the rule is not evaluated when all are).
      pullback: ``pullback(residuals, out_bar, **static) -> arg_cotangents``, one per argument of
        that argument's structure, or ``None`` for a zero cotangent. It must be the transpose of
        ``pushforward`` in JAX's convention (a bilinear pairing ``Re Σ x̄ ⊙ ẋ``, no conjugation).
      primal: ``primal(*args, **static) -> out``, for rules whose residuals cost more than the
        output (a user's ``rrule`` traces its pullback to get them); by default
        ``forward(...)[0]``, whose unused residuals ``jit`` removes.

    Calling the rule, ``rule(*args, **static)``, returns ``out``. Both derivative functions take
    the arguments' leading batch axes as they are; ``vmap`` adds more through ``jax.vmap``.
    """

    def __init__(self, name: str, forward: Forward, pushforward: Pushforward, pullback: Pullback,
                 *, primal: Callable[..., Any] | None = None) -> None:
        self.name, self.forward, self.pushforward, self.pullback = name, forward, pushforward, pullback
        self.primal = primal
        self._functions: dict[tuple, Callable] = {}
        self.primitive = _linear_primitive(self)

    def __repr__(self) -> str:
        return f"Rule({self.name!r})"

    def __call__(self, *args: Any, **static: Hashable) -> Any:
        key = tuple(sorted(static.items()))
        fn = self._functions.get(key)
        if fn is None:
            fn = self._functions[key] = self._custom_jvp(key)
        return fn(*args)

    def _custom_jvp(self, static: tuple) -> Callable:
        kwargs = dict(static)

        def primal(*args):
            if self.primal is not None:
                return self.primal(*args, **kwargs)
            return self.forward(*args, **kwargs)[0]

        def jvp(primals, tangents):
            arg_tangents = [_nonzero_tangent(t) for t in tangents]
            tan_leaves, tan_tree = jax.tree.flatten(arg_tangents)
            with set_current_trace(_primal_trace(primals, tan_leaves)):
                out, residuals = self.forward(*primals, **kwargs)
            out_leaves, out_tree = jax.tree.flatten(out)
            if not any(jnp.size(t) for t in tan_leaves) or not any(jnp.size(y) for y in out_leaves):
                # All tangents zero, or every array empty: the output tangent is zero (and the
                # rule's own code need not handle empty shapes).
                return out, jax.tree.unflatten(out_tree, map(SymbolicZero.from_primal_value, out_leaves))
            res_leaves, res_tree = jax.tree.flatten(residuals)
            out_tangent = self.primitive.bind(
                *map(jnp.asarray, res_leaves), *tan_leaves, static=static,
                trees=_Trees(res_tree, tan_tree, out_tree), batch=())
            return out, jax.tree.unflatten(out_tree, out_tangent)

        primal.__name__ = primal.__qualname__ = self.name  # readable jaxprs
        fn = jax.custom_jvp(primal)
        fn.defjvp(jvp, symbolic_zeros=True)
        return fn

    # ------------------------------------------------------------------------------------------
    # The linear primitive. Its operands are the residual leaves, then the nonzero tangent leaves;
    # its parameters the static arguments, the three tree structures and the batch axes added by
    # vmap (innermost first).

    def tangent_map(self, *leaves: jax.Array, static: tuple, trees: _Trees,
                    batch: tuple) -> list[jax.Array]:
        """``pushforward`` on flat operands, under the recorded ``vmap`` batch axes."""
        n_res = trees.residuals.num_leaves

        def push(*leaves):
            residuals = jax.tree.unflatten(trees.residuals, leaves[:n_res])
            tangents = jax.tree.unflatten(trees.tangents, leaves[n_res:])
            out = self.pushforward(residuals, *tangents, **dict(static))
            return trees.outputs.flatten_up_to(out)

        for axes in batch:
            push = jax.vmap(push, in_axes=axes, out_axes=0)
        return push(*leaves)

    def _transpose(self, cts, *leaves, static, trees, batch):
        n_res = trees.residuals.num_leaves
        residuals, linear = leaves[:n_res], leaves[n_res:]
        if any(ad.is_undefined_primal(r) for r in residuals):
            raise AssertionError(f"{self.name}: the residuals of a pushforward are not linear inputs.")
        cts = [ad.instantiate_zeros(ct) for ct in cts]

        def pull(*operands):
            residual_tree = jax.tree.unflatten(trees.residuals, operands[:n_res])
            out_bar = jax.tree.unflatten(trees.outputs, operands[n_res:])
            bars = self.pullback(residual_tree, out_bar, **dict(static))
            return _cotangent_leaves(self.name, trees.tangents, bars)

        for axes in batch:
            pull = _batched_pullback(pull, axes, n_res, len(cts))
        bars = pull(*residuals, *cts)
        return [None] * n_res + [b if ad.is_undefined_primal(x) else None
                                 for b, x in zip(bars, linear)]

    def _jvp_of_tangent_map(self, primals, tangents, *, static, trees, batch):
        params = dict(static=static, trees=trees, batch=batch)
        n_res = trees.residuals.num_leaves
        out = self.primitive.bind(*primals, **params)
        residuals, linear = primals[:n_res], primals[n_res:]
        res_dots, lin_dots = tangents[:n_res], tangents[n_res:]
        total = None
        if not all(type(t) is ad.Zero for t in lin_dots):  # linear in the tangent operands
            total = self.primitive.bind(*residuals, *map(ad.instantiate_zeros, lin_dots), **params)
        moving = [i for i, t in enumerate(res_dots) if type(t) is not ad.Zero]
        if moving:  # derivatives of order ≥ 2: JAX differentiates pushforward in the residuals

            def in_residuals(*moved):
                res = list(residuals)
                for i, r in zip(moving, moved):
                    res[i] = r
                return self.tangent_map(*res, *linear, **params)

            _, by_residuals = jax.jvp(in_residuals, tuple(residuals[i] for i in moving),
                                      tuple(res_dots[i] for i in moving))
            total = by_residuals if total is None else [a + b for a, b in zip(total, by_residuals)]
        if total is None:
            total = [ad.Zero(jax.typeof(y).to_tangent_aval()) for y in out]
        return out, total

    def _batch(self, args, dims, *, static, trees, batch):
        axes = tuple(d if isinstance(d, int) else None for d in dims)
        out = self.primitive.bind(*args, static=static, trees=trees, batch=batch + (axes,))
        return out, [0] * len(out)

    def _abstract_eval(self, *avals, static, trees, batch):
        return _abstract_eval_cached(self, avals, static, trees, batch)


class _Trees:
    """The pytree structures of a rule's residuals, nonzero tangents and outputs (a static param)."""

    __slots__ = ("residuals", "tangents", "outputs")

    def __init__(self, residuals, tangents, outputs):
        self.residuals, self.tangents, self.outputs = residuals, tangents, outputs

    def _key(self):
        return (self.residuals, self.tangents, self.outputs)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, _Trees) and self._key() == other._key()

    def __repr__(self):
        return f"trees({self.residuals.num_leaves} residuals, {self.tangents.num_leaves} tangents)"


def _linear_primitive(rule: Rule) -> Primitive:
    p = Primitive(f"{rule.name}_pushforward")
    p.multiple_results = True
    # Eager evaluation runs the pushforward op by op, like any eager JAX code (and unlike a jit of
    # the primitive, it also runs under jax.disable_jit).
    p.def_impl(rule.tangent_map)
    p.def_abstract_eval(rule._abstract_eval)
    mlir.register_lowering(p, mlir.lower_fun(rule.tangent_map, multiple_results=True))
    ad.primitive_jvps[p] = rule._jvp_of_tangent_map
    ad.primitive_transposes[p] = rule._transpose
    batching.primitive_batchers[p] = rule._batch
    return p


@functools.lru_cache(maxsize=4096)
def _abstract_eval_cached(rule, avals, static, trees, batch):
    # Shapes, dtypes and shard_map varying axes of the outputs, by tracing the pushforward once
    # per signature (binding the primitive again with the same operands reuses the result).
    fun = functools.partial(rule.tangent_map, static=static, trees=trees, batch=batch)
    wrapped = lu.wrap_init(fun, debug_info=debug_info(rule.primitive.name, fun, avals, {}))
    _, out_avals, _ = pe.trace_to_jaxpr_dynamic(wrapped, avals)
    return out_avals


def _primal_trace(primals, tangent_leaves):
    """The trace to evaluate a rule's forward on: the primals' own, when they are known.

    Reverse mode linearises a ``custom_jvp`` rule by partial evaluation (JAX's
    ``linearize_from_jvp``): its JVP runs under a ``JaxprTrace`` whose tangents are unknown
    ``JaxprTracer``s and whose primals are values of the trace beneath. Every op of the forward
    would pass through that trace only to be bound beneath it, and each ``jnp`` function is a
    ``jit`` whose partial evaluation re-traces its jaxpr: tracing the forward there costs several
    times its tracing beneath, and lengthens every compilation of a gradient. The forward sees
    only primals, so evaluating it beneath gives the same values.
    """
    with take_current_trace() as trace:
        pass
    # That trace is the current one (not, e.g., a vmap trace of the JVP nested in it) exactly
    # when the tangents are its tracers; the primals are then never its tracers.
    linearizing = any(isinstance(t, pe.JaxprTracer) and t._trace is trace for t in tangent_leaves)
    # A JAX without ``parent_trace`` gets the equal evaluation on the current trace.
    return getattr(trace, "parent_trace", trace) if linearizing else trace


def _nonzero_tangent(t):
    """``None`` for a symbolically zero argument tangent; zeros filled in for its zero leaves.

    Integer leaves have no tangent: they stay ``None`` (and get no cotangent).
    """
    leaves, tree = jax.tree.flatten(t, is_leaf=lambda x: isinstance(x, SymbolicZero))
    if all(isinstance(x, SymbolicZero) for x in leaves):
        return None

    def fill(x):
        if not isinstance(x, SymbolicZero):
            return x
        return None if x.dtype == jax.dtypes.float0 else jnp.zeros(x.shape, x.dtype)

    return jax.tree.unflatten(tree, [fill(x) for x in leaves])


def _cotangent_leaves(name, tangent_tree, bars):
    """The pullback's cotangents as leaves matching the nonzero tangents (``None``: zero)."""
    n_args = len(tangent_tree.children())
    if not isinstance(bars, (tuple, list)) or len(bars) != n_args:
        raise ValueError(f"{name}: the pullback must return a tuple with one cotangent per "
                         f"argument ({n_args}); got {type(bars).__name__}"
                         f"{f' of length {len(bars)}' if isinstance(bars, (tuple, list)) else ''}.")
    leaves: list[Any] = []
    for child, bar in zip(tangent_tree.children(), bars):
        if child.num_leaves == 0:  # a zero tangent: its operand is absent, its cotangent unused
            continue
        leaves.extend([None] * child.num_leaves if bar is None else child.flatten_up_to(bar))
    return leaves


def _batched_pullback(pull, axes, n_res, n_cts):
    """``pull`` under one ``vmap`` level: cotangents of unbatched tangents summed over the batch."""
    res_axes, lin_axes = axes[:n_res], axes[n_res:]

    def batched(*operands):
        outs = jax.vmap(pull, in_axes=(*res_axes, *[0] * n_cts),
                        out_axes=[0 if a is None else a for a in lin_axes])(*operands)
        return [x if x is None or a is not None else jnp.sum(x, axis=0)
                for x, a in zip(outs, lin_axes)]

    return batched
