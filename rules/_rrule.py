"""ChainRules-style rule definitions: ``rrule`` (pullbacks) and ``frule`` (pushforwards).

A ChainRules ``rrule`` returns the primal output together with a pullback closure. JAX's
``jax.custom_vjp`` wants the same information as two functions, ``fwd`` returning residuals and
``bwd`` consuming them. :func:`rrule` bridges the two: the pullback is traced once, in ``fwd``, to a
jaxpr, and every array it closes over becomes a residual. Nothing of the forward is recomputed in
the backward pass.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import ClosedJaxpr, jaxpr_as_fun

from ._utils import match_varying

__all__ = ["rrule", "frule", "register_frule"]


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
    if p_tree != c_tree:
        raise ValueError(f"rrule: the pullback's cotangent for `{name}` must have the structure of "
                         f"the argument, {p_tree}; got {c_tree}.")
    out = []
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


def rrule(fun: Callable | None = None, *, nondiff_argnums: Sequence[int] = ()) -> Callable:
    """Turn a ChainRules-style rule into a ``jax.custom_vjp`` function.

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
    * Arrays the pullback closes over become the residuals of ``custom_vjp``: the forward is not
      recomputed in the backward pass, and nothing else is kept.
    * Cotangents are projected onto their argument: same structure and shape are required, the dtype
      is cast to the argument's, a real argument keeps the real part of a complex cotangent, and
      integer arguments get none.
    * ``@rrule(nondiff_argnums=(k,))`` marks arguments that are static (hashable, non-array). The
      pullback may then return cotangents for all arguments (``None`` at static positions) or only
      for the differentiable ones.
    * Methods work: decorating ``__call__`` of a callable pytree makes ``self`` the first argument,
      and its cotangent (ChainRules' ``∂self``) is a pytree of the same class.

    Notes:
      A ``custom_vjp`` function has no forward mode: ``jax.jvp`` of it raises. Register an explicit
      pushforward with :func:`register_frule` and call :func:`frule` for directional derivatives.

    Args:
      fun: ``fun(*args) -> (out, pullback)`` with ``pullback(out_bar) -> tuple of cotangents``.
      nondiff_argnums: positions of static, non-array arguments.

    Returns:
      A function with ``fun``'s signature that returns ``out``.
    """
    if fun is None:
        return functools.partial(rrule, nondiff_argnums=nondiff_argnums)
    nondiff = tuple(sorted(int(i) for i in nondiff_argnums))

    def split(args):
        return [a for i, a in enumerate(args) if i not in nondiff]

    @functools.partial(jax.custom_vjp, nondiff_argnums=nondiff)
    def primal(*args):
        out, _ = fun(*args)
        return out

    def fwd(*args):
        out, pullback = fun(*args)
        diff_args = split(args)
        names = [f"argument {i}" for i in range(len(args)) if i not in nondiff]

        def projected_pullback(out_bar):
            cts = pullback(out_bar)
            if not isinstance(cts, (tuple, list)):
                if len(diff_args) != 1:
                    raise TypeError(f"rrule: the pullback of {fun.__name__} must return a tuple of "
                                    f"{len(args)} cotangents; got {type(cts).__name__}.")
                cts = (cts,)
            if len(cts) == len(args) and nondiff:
                cts = split(cts)
            if len(cts) != len(diff_args):
                raise ValueError(f"rrule: the pullback of {fun.__name__} must return one cotangent per "
                                 f"argument ({len(args)}); got {len(cts)}.")
            return tuple(_project(n, a, c) for n, a, c in zip(names, diff_args, cts))

        closed, shape = jax.make_jaxpr(projected_pullback, return_shape=True)(out)
        return out, _TracedPullback(closed.jaxpr, list(closed.consts),
                                    jax.tree_util.tree_structure(shape))

    def bwd(*res_and_ct):
        traced, out_bar = res_and_ct[-2:]
        return traced(out_bar)

    primal.defvjp(fwd, bwd)

    @functools.wraps(fun)
    def wrapped(*args):
        diff_args = match_varying(*split(args))  # shard_map: see rules/_utils.py
        it = iter(diff_args)
        return primal(*[a if i in nondiff else next(it) for i, a in enumerate(args)])

    return wrapped


# ----------------------------------------------------------------------------------------------
# Pushforwards

_PUSHFORWARDS: dict[Callable, Callable] = {}


def register_frule(rule: Callable) -> Callable[[Callable], Callable]:
    """Register the explicit pushforward of ``rule``, for :func:`frule` and ``rules.testing``.

    Used as a decorator::

        @rules.register_frule(scale)
        def scale_pushforward(primals, tangents):
            (x, y), (x_dot, y_dot) = primals, tangents
            return x * y, x_dot * y + x * y_dot

    The pushforward receives the tuples of primals and tangents (and any keyword arguments of the
    rule) and returns ``(out, out_tangent)``.
    """

    def register(pushforward: Callable) -> Callable:
        _PUSHFORWARDS[rule] = pushforward
        return pushforward

    return register


def has_frule(rule: Callable) -> bool:
    """Whether :func:`frule` knows a pushforward for ``rule``."""
    try:
        return rule in _PUSHFORWARDS
    except TypeError:  # unhashable callables cannot have been registered
        return False


def frule(rule: Callable, primals: Sequence[Any], tangents: Sequence[Any], **kwargs) -> tuple[Any, Any]:
    """Pushforward (forward-mode derivative) through a rule: ChainRules' ``frule``.

    .. math:: (y, \\dot y) = (f(x), J_f(x)\\, \\dot x)

    ``jax.jvp`` cannot differentiate a ``jax.custom_vjp`` function, so every rule of this library
    has an explicit pushforward, looked up here by the rule itself.

    Args:
      rule: a rule of this library (``rules.inv``, ``rules.qr``, ...) or one registered with
        :func:`register_frule`.
      primals: the rule's positional arguments.
      tangents: one tangent per primal, same shapes and dtypes.
      **kwargs: the rule's keyword arguments (``mode="r"`` for ``rules.qr``).

    Returns:
      ``(out, out_tangent)``, both with the structure of ``rule(*primals)``.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 0.0], [0.0, 4.0]], dtype=jnp.float32)
      >>> b, b_dot = rules.frule(rules.inv, (a,), (jnp.eye(2, dtype=jnp.float32),))
      >>> b_dot  # -B dA B
      Array([[-0.25  , -0.    ],
             [-0.    , -0.0625]], dtype=float32)
    """
    if not has_frule(rule):
        name = getattr(rule, "__name__", repr(rule))
        raise KeyError(f"frule: no pushforward is registered for {name}; define one with "
                       f"@rules.register_frule({name}).")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"frule: got {len(primals)} primals but {len(tangents)} tangents.")
    return _PUSHFORWARDS[rule](primals, tangents, **kwargs)
