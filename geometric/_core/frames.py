"""The hooks shared by manifolds whose points are n×p orthonormal frames ``YᵀY = I``."""
from __future__ import annotations

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp

from rules.internal import gram_error, haar_frame, polar_factor

from .manifold import AbstractManifold

__all__ = ["AbstractFrameManifold"]


class AbstractFrameManifold(AbstractManifold):
    """St(n, p), its quotient Gr(n, p) and O(n) = St(n, n): points are orthonormal frames.

    Random points are Haar frames, the nearest point is the polar factor and the error is
    ``‖YᵀY - I‖_F``. With ``_transposed`` (``rows=True``) the public layout is ``(p, n)``. Points
    are frames in the hooks' layout, so they have the capability ``"frame"`` with the identity as
    :meth:`to_frame` and :meth:`from_frame`.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({"frame"})

    @property
    @abc.abstractmethod
    def _frame_size(self) -> tuple[int, int]:
        """``(n, p)``: the hooks' layout."""

    @property
    def shape(self) -> tuple[int, int]:
        n, p = self._frame_size
        return (p, n) if self._transposed else (n, p)

    @property
    def _error_formula(self) -> str:
        return "‖xxᵀ − I‖_F" if self._transposed else "‖xᵀx − I‖_F"

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        return haar_frame(key, *self._frame_size, dtype)

    def _project_point(self, x: jax.Array) -> jax.Array:
        return polar_factor(x)

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        return gram_error(x)

    def _to_frame(self, x: jax.Array) -> jax.Array:
        return x

    def _from_frame(self, y: jax.Array) -> jax.Array:
        return y
