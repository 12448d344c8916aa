"""ChainRules-style rule definitions for users: ``rrule`` (pullbacks) and ``frule`` (pushforwards).

A ChainRules ``rrule`` returns the primal output together with a pullback closure; a ``frule``
maps primals and tangents to the output and its tangent. :func:`rrule` turns the first into a JAX
function whose reverse mode runs the pullback; :func:`register_frule` adds the second, and from
then on the function supports forward mode (``jax.jvp``, ``jax.jacfwd``, ``jax.linearize``)
through it, on the same :class:`~rules._core.rule.Rule` mechanism as the library's own rules.

The pullback closure is traced once, in the forward pass, to a jaxpr: every array it closes over
becomes a residual, and nothing of the forward is recomputed in the backward pass.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from .rule import Rule
from .sharding import match_varying

__all__ = ["frule", "register_frule", "rrule"]

Pushforward = Callable[..., tuple[Any, Any]]


@jax.tree_util.register_pytree_node_class
class _TracedPullback:
    """A pullback traced to a jaxpr: its closed-over arrays are pytree leaves (the residuals)."""

    def __init__(self, jaxpr, consts, out_tree):
        self.jaxpr, self.consts, self.out_tree = jaxpr, consts, out_tree

    def tree_flatten(self):
        return self.consts, (self.jaxpr, self.out_tree)

    @classmethod
    def tree_unflatten(cls, aux, consts):
        return cls(aux[0], list(consts), aux[1])

    def __call__(self, *cotangents):
        flat = jaxpr_as_fun(ClosedJaxpr(self.jaxpr, self.consts))(*jax.tree_util.tree_leaves(cotangents))
        return jax.tree_util.tree_unflatten(self.out_tree, flat)


def _project(name: str, primal, cotangent):
    """Bring ``cotangent`` to the structure, shape and dtype of ``primal`` (ChainRules' ProjectTo).

    ``None`` stands for a zero cotangent, at any level of the pytree. A real primal keeps the real
    part of a complex cotangent; integer and boolean primals have no cotangent.
    """
    if cotangent is None:
        return None
    p_leaves, p_tree = jax.tree_util.tree_flatten(primal)
    c_leaves, c_tree = jax.tree_util.tree_flatten(cotangent, is_leaf=lambda x: x is None)
    if p_tree != c_tree:  # type: ignore[operator]  # jaxlib ships no stub for PyTreeDef
        raise ValueError(f"rrule: the pullback's cotangent for `{name}` must have the structure of "
                         f"the argument, {p_tree}; got {c_tree}.")
    out: list[jax.Array | None] = []
    for p, c in zip(p_leaves, c_leaves):
        p = jnp.asarray(p)
        if c is None or not jnp.issubdtype(p.dtype, jnp.inexact):
            out.append(None)
            continue
        c = jnp.asarray(c)
        if c.shape != p.shape:
            raise ValueError(f"rrule: the pullback's cotangent for `{name}` must have shape "
                             f"{p.shape}; got {c.shape}.")
        if jnp.iscomplexobj(c) and not jnp.iscomplexobj(p):
            c = c.real
        out.append(c.astype(p.dtype))
    return jax.tree_util.tree_unflatten(p_tree, out)


class _UserRule:
    """What :func:`rrule` builds around ``fun(*args) -> (out, pullback)``.

    Without a registered pushforward it is a ``jax.custom_vjp`` (reverse mode only); once
    :func:`register_frule` gives it one, it is a :class:`Rule` and supports every transformation.
    """

    def __init__(self, fun: Callable, nondiff_argnums: tuple[int, ...]):
        self.fun, self.nondiff = fun, nondiff_argnums
        self.name = getattr(fun, "__name__", "rule")
        self.signature = inspect.signature(fun)
        self.pushforward: Pushforward | None = None
        self.rule = Rule(self.name, self._forward, self._pushforward, self._pullback,
                         primal=self._primal)
        self.custom_vjp = jax.custom_vjp(self._primal_positional, nondiff_argnums=nondiff_argnums)
        self.custom_vjp.defvjp(self._vjp_forward, self._vjp_backward)

    # Arguments: positional, split into the differentiable ones and the static ones.

    def positional(self, args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}: {e}") from None
        bound.apply_defaults()
        return bound.args

    def split(self, args: Sequence) -> list:
        return [a for i, a in enumerate(args) if i not in self.nondiff]

    def __call__(self, *args, **kwargs):
        args = self.positional(args, kwargs)
        static = tuple(args[i] for i in self.nondiff)
        diff = match_varying(*self.split(args))  # shard_map: rules/_core/sharding.py
        if self.pushforward is not None:
            return self.rule(*diff, static=static)
        try:
            return self.custom_vjp(*_interleave(self.nondiff, diff, static))
        except TypeError as e:
            if "can't apply forward-mode autodiff (jvp) to a custom_vjp function" not in str(e):
                raise
            raise TypeError(self.no_pushforward("has")) from None

    def no_pushforward(self, what: str) -> str:
        """The message for forward mode of a rule without a pushforward: how to register one."""
        return (f"{self.name} is a rules.rrule with a pullback only, so it {what} no forward mode "
                f"(jax.jvp, jax.jacfwd, jax.linearize, rules.frule). Give it a pushforward:\n\n"
                f"    @rules.register_frule({self.name})\n"
                f"    def {self.name}_pushforward(primals, tangents):\n"
                f"        ...\n"
                f"        return out, out_tangent\n")

    def call(self, args: Sequence) -> tuple[Any, Callable]:
        """``fun(*args)``, checked at trace time to be ``(output, pullback)``."""
        result = self.fun(*args)
        if not (isinstance(result, tuple) and len(result) == 2 and callable(result[1])):
            got = (f"a tuple of {len(result)}" if isinstance(result, tuple) else
                   type(result).__name__)
            if isinstance(result, tuple) and len(result) == 2:
                got = f"a pair whose second element is a {type(result[1]).__name__}"
            raise TypeError(f"rrule: {self.name} must return `(output, pullback)`, the output and "
                            f"the function that maps its cotangent to the arguments'; got {got}.")
        return result

    # The traced pullback, shared by both paths.

    def traced_pullback(self, args: tuple) -> tuple[Any, _TracedPullback]:
        out, pullback = self.call(args)
        diff_args = self.split(args)
        names = [f"argument {i}" for i in range(len(args)) if i not in self.nondiff]

        def projected_pullback(out_bar):
            cts = pullback(out_bar)
            if not isinstance(cts, (tuple, list)):
                if len(diff_args) != 1:
                    raise TypeError(f"rrule: the pullback of {self.name} must return a tuple of "
                                    f"{len(args)} cotangents; got {type(cts).__name__}.")
                cts = (cts,)
            if len(cts) == len(args) and self.nondiff:
                cts = self.split(cts)
            if len(cts) != len(diff_args):
                raise ValueError(f"rrule: the pullback of {self.name} must return one cotangent "
                                 f"per argument ({len(args)}); got {len(cts)}.")
            return tuple(_project(n, a, c) for n, a, c in zip(names, diff_args, cts))

        closed, shape = jax.make_jaxpr(projected_pullback, return_shape=True)(out)
        return out, _TracedPullback(closed.jaxpr, list(closed.consts),
                                    jax.tree_util.tree_structure(shape))

    # The Rule path (with a pushforward). Static arguments travel as the keyword `static`.

    def _primal(self, *diff, static):
        return self.call(_interleave(self.nondiff, diff, static))[0]

    def _forward(self, *diff, static):
        out, traced = self.traced_pullback(tuple(_interleave(self.nondiff, diff, static)))
        return out, (tuple(diff), traced)

    def _pushforward(self, res, *tangents, static):
        diff, _ = res
        # The user's pushforward gets zeros (of the primal's structure) for zero tangents.
        filled = [jax.tree.map(jnp.zeros_like, x) if t is None else t
                  for x, t in zip(diff, tangents)]
        assert self.pushforward is not None  # this path is taken only with one registered
        return self.pushforward(tuple(_interleave(self.nondiff, diff, static)),
                                tuple(_interleave(self.nondiff, filled, (None,) * len(static))))[1]

    def _pullback(self, res, out_bar, static):
        _, traced = res
        return traced(out_bar)

    # The custom_vjp path (pullback only).

    def _primal_positional(self, *args):
        return self.call(args)[0]

    def _vjp_forward(self, *args):
        return self.traced_pullback(args)

    def _vjp_backward(self, *static_res_ct):
        traced, out_bar = static_res_ct[-2:]
        return traced(out_bar)


def _interleave(nondiff: tuple[int, ...], diff: Sequence, static: Sequence) -> list:
    """The full positional argument list from the differentiable and the static arguments."""
    diff, static = list(diff), list(static)
    diff_it, static_it = iter(diff), iter(static)
    return [next(static_it) if i in nondiff else next(diff_it)
            for i in range(len(diff) + len(static))]


def rrule(fun: Callable | None = None, *, nondiff_argnums: Sequence[int] = ()) -> Callable:
    """Turn a ChainRules-style rule into a JAX function whose reverse mode runs its pullback.

    The decorated function computes the primal output and its pullback::

        @rules.rrule
        def scale(x, y):
            z = x * y
            def pullback(z_bar):          # one cotangent per argument
                return z_bar * y, z_bar * x
            return z, pullback

    ``scale(x, y)`` then returns ``z`` only, and ``jax.grad``/``jax.vjp`` use ``pullback``.

    * The pullback returns a tuple with one cotangent per argument; ``None`` means a zero cotangent
      (also inside a pytree). With a single differentiable argument a bare cotangent is accepted.
    * Arrays the pullback closes over become the residuals: the forward is not recomputed in the
      backward pass, and nothing else is kept.
    * Cotangents are projected onto their argument: same structure and shape are required, the dtype
      is cast to the argument's, a real argument keeps the real part of a complex cotangent, and
      integer arguments get none.
    * ``@rrule(nondiff_argnums=(k,))`` marks arguments that are static (hashable, non-array). The
      pullback may then return cotangents for all arguments (``None`` at static positions) or only
      for the differentiable ones.
    * Keyword arguments are accepted and bound to their positions (``scale(x, y=y)``).
    * Methods work: decorating ``__call__`` of a callable pytree makes ``self`` the first argument,
      and its cotangent (ChainRules' ``∂self``) is a pytree of the same class.

    Forward mode: a rule with a pullback only is a ``jax.custom_vjp``, and ``jax.jvp`` of it raises
    a ``TypeError`` that says how to add a pushforward. Register one with :func:`register_frule`
    and the rule supports ``jax.jvp``, ``jax.jacfwd``, ``jax.linearize`` and every composition,
    running the pushforward in forward mode and still the pullback in reverse mode.

    Args:
      fun: ``fun(*args) -> (out, pullback)`` with ``pullback(out_bar) -> tuple of cotangents``.
      nondiff_argnums: positions of static, non-array arguments.

    Returns:
      A function with ``fun``'s signature that returns ``out``.

    Raises:
      TypeError: when the function is called (at trace time), if ``fun`` does not return a pair
        ``(out, pullback)`` with a callable ``pullback``.
    """
    if fun is None:
        return functools.partial(rrule, nondiff_argnums=nondiff_argnums)
    user_rule = _UserRule(fun, tuple(sorted(int(i) for i in nondiff_argnums)))

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        return user_rule(*args, **kwargs)

    wrapped.rule = user_rule  # type: ignore[attr-defined]
    return wrapped


def user_rule_of(fn: Callable) -> _UserRule | None:
    return getattr(fn, "rule", None) if isinstance(getattr(fn, "rule", None), _UserRule) else None


def register_frule(rule: Callable) -> Callable[[Pushforward], Pushforward]:
    """Give an :func:`rrule` function its pushforward, and with it forward mode.

    Used as a decorator::

        @rules.register_frule(scale)
        def scale_pushforward(primals, tangents):
            (x, y), (x_dot, y_dot) = primals, tangents
            return x * y, x_dot * y + x * y_dot

    The pushforward receives the tuples of primals and tangents (zeros where a tangent is zero;
    ``None`` at static positions) and returns ``(out, out_tangent)``; it must be linear in the
    tangents. From then on ``jax.jvp`` (and ``jacfwd``, ``linearize``, ``hessian``, ...) of the rule
    run it, while ``jax.grad`` and ``jax.vjp`` still run the pullback.

    Raises:
      TypeError: ``rule`` is not a function made by :func:`rrule` (the library's own rules have
        their pushforwards built in).
    """
    user_rule = user_rule_of(rule)
    if user_rule is None:
        raise TypeError(f"register_frule: `rule` must be a function made by rules.rrule; got "
                        f"{getattr(rule, '__name__', repr(rule))}.")

    def register(pushforward: Pushforward) -> Pushforward:
        user_rule.pushforward = pushforward
        return pushforward

    return register


def frule(rule: Callable, primals: Sequence[Any], tangents: Sequence[Any],
          **kwargs: Any) -> tuple[Any, Any]:
    """Pushforward (forward-mode derivative) through a rule: ChainRules' ``frule``.

    .. math:: (y, \\dot y) = (f(x), J_f(x)\\, \\dot x)

    The same as ``jax.jvp(functools.partial(rule, **kwargs), primals, tangents)``: every rule of this
    library, and every :func:`rrule` with a registered pushforward, runs its explicit pushforward.

    Args:
      rule: a rule of this library (``rules.inv``, ``rules.qr``, ...), an :func:`rrule` with a
        pushforward, or any JAX function.
      primals: the rule's positional arguments.
      tangents: one tangent per primal, same shapes and dtypes.
      **kwargs: the rule's keyword arguments (``mode="r"`` for ``rules.qr``).

    Returns:
      ``(out, out_tangent)``, both with the structure of ``rule(*primals)``.

    Raises:
      TypeError: ``rule`` is an :func:`rrule` without a registered pushforward (the message shows
        how to register one).
      ValueError: the numbers of primals and tangents differ.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 0.0], [0.0, 4.0]], dtype=jnp.float32)
      >>> b, b_dot = rules.frule(rules.inv, (a,), (jnp.eye(2, dtype=jnp.float32),))
      >>> b_dot  # -B dA B
      Array([[-0.25  , -0.    ],
             [-0.    , -0.0625]], dtype=float32)
    """
    user_rule = user_rule_of(rule)
    if user_rule is not None and user_rule.pushforward is None:
        raise TypeError(f"frule: {user_rule.no_pushforward('has')}")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"frule: got {len(primals)} primals but {len(tangents)} tangents.")
    return jax.jvp(functools.partial(rule, **kwargs), primals, tangents)
