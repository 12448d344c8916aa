r"""Symplectic autoencoders and proper symplectic decomposition (model reduction).

A decoder ``ψ: ℝ^{2n} → ℝ^{2N}`` with ``(Dψ)ᵀ J_{2N} Dψ = J_{2n}`` (a symplectic immersion) turns a
Hamiltonian ``H`` on ``ℝ^{2N}`` into the reduced Hamiltonian system ``ξ̇ = J_{2n}∇(H∘ψ)(ξ)``
(Peng & Mohseni 2016; Brantner & Kraus 2023). Derivations:
``docs/derivations/symplectic-autoencoders.md``.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import rules
from rules.internal import (
    HIGHEST,
    REAL_DTYPES,
    check_array,
    check_matrix,
    householder_qr_factor,
)

from .._core.checks import check_bool_field, check_int_field, check_real_dtype
from .._manifolds.symplectic_stiefel import SymplecticStiefel
from ._sympnet import glorot_uniform, gradient_p, gradient_q

__all__ = ["SymplecticAutoencoder", "cotangent_lift", "psd_decode", "psd_encode",
           "reduced_vector_field"]

Params = dict[str, tuple[dict[str, jax.Array], ...]]


def cotangent_lift(snapshots: jax.Array, reduced_dim: int) -> jax.Array:
    r"""Proper symplectic decomposition by the cotangent lift: an optimal PSD-like basis.

    .. math::
        \Phi = \begin{bmatrix} V & 0 \\ 0 & V \end{bmatrix} \in \mathrm{SpSt}(2N, 2k), \qquad
        V = \text{the } k \text{ leading left singular vectors of }
        [\,Q^T\;\; P^T\,] \in \mathbb{R}^{N\times 2m}

    for ``m`` snapshots ``z_i = (q_i, p_i)``, the rows of ``snapshots = [Q, P]``, and ``2k =
    reduced_dim``. ``Φ`` is orthosymplectic (``ΦᵀΦ = I``, ``ΦᵀJΦ = J``, so its symplectic
    inverse is ``Φᵀ``), and it minimises the projection error
    ``Σ_i ‖z_i - ΦΦ⁺z_i‖² = Σ_{j>k} σ_j²`` over all bases of this block form (the ``σ_j`` are the
    singular values of ``[Qᵀ Pᵀ]``). GML's ``solve!`` on a ``PSDArch``.

    Args:
      snapshots: ``(..., m, 2N)`` real floats, one phase-space state per row.
      reduced_dim: ``2k``, even, with ``k ≤ N`` and ``k ≤ 2m``.

    Returns:
      ``Φ``, ``(..., 2N, 2k)``, a point of ``geometric.SymplecticStiefel(N, k)``.

    Raises:
      TypeError: ``snapshots`` is not a float32/float64 array; ``reduced_dim`` is not an int.
      ValueError: ``snapshots`` is not ``(..., m, 2N)`` with even ``2N``; ``reduced_dim`` is odd,
        ``< 2`` or larger than ``min(2N, 4m)``.

    References:
      L. Peng, K. Mohseni, "Symplectic model reduction of Hamiltonian systems", SIAM J. Sci.
      Comput. 38 (2016), https://arxiv.org/abs/1407.6118.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn
      >>> z = jax.random.normal(jax.random.PRNGKey(0), (20, 8))  # 20 snapshots, N = 4
      >>> phi = geometric.nn.cotangent_lift(z, 2)
      >>> sp = geometric.SymplecticStiefel(4, 1)
      >>> phi.shape, bool(sp.manifold_error(phi) < 1e-6)
      ((8, 2), True)
    """
    name = "cotangent_lift"
    check_matrix(name, "snapshots", snapshots, dtypes=REAL_DTYPES)
    m, full = snapshots.shape[-2:]
    if full % 2:
        raise ValueError(f"{name}: `snapshots` must have shape (..., m, 2N) with an even number "
                         f"of columns 2N; got {tuple(snapshots.shape)}.")
    k = _even_dim(name, "reduced_dim", reduced_dim) // 2
    if k > min(full // 2, 2 * m):
        raise ValueError(f"{name}: `reduced_dim` must be at most min(2N, 4m) = "
                         f"{2 * min(full // 2, 2 * m)} for snapshots of shape "
                         f"{tuple(snapshots.shape)}; got {reduced_dim}.")
    n = full // 2
    z = jnp.asarray(snapshots)
    stacked = jnp.concatenate([z[..., :n], z[..., n:]], axis=-2).mT  # [Qᵀ Pᵀ], (..., N, 2m)
    v = rules.svd(stacked, full_matrices=False).U[..., :k]
    zero = jnp.zeros_like(v)
    return jnp.concatenate([jnp.concatenate([v, zero], axis=-1),
                            jnp.concatenate([zero, v], axis=-1)], axis=-2)


def psd_encode(z: jax.Array, phi: jax.Array) -> jax.Array:
    r"""The reduced coordinates of ``z`` by the symplectic inverse of a PSD-like basis ``Φ``.

    .. math::
        \xi = \Phi^+ z = J_{2n}^T\,\Phi^T J_{2N}\, z

    For ``Φ ∈ SpSt(2N, 2n)``, ``Φ⁺Φ = I`` (so ``psd_encode(psd_decode(ξ, Φ), Φ) = ξ``) and
    ``Φ⁺ J_{2N} (Φ⁺)ᵀ = J_{2n}``: the encoder is a linear symplectic submersion. For an
    orthosymplectic ``Φ`` (GML's PSD-like layers, :func:`cotangent_lift`) ``Φ⁺ = Φᵀ``.

    Args:
      z: ``(..., 2N)`` phase-space points ``(q, p)``, real floats.
      phi: ``(2N, 2n)``, a point of ``geometric.SymplecticStiefel(N, n)``.

    Returns:
      ``ξ``, ``(..., 2n)``.

    Raises:
      TypeError: ``z`` or ``phi`` is not a float32/float64 array.
      ValueError: ``phi`` is not ``(2N, 2n)`` with even sides; ``z`` is not ``(..., 2N)``.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn
      >>> phi = geometric.SymplecticStiefel(3, 1).random_point(jax.random.PRNGKey(0), jnp.float64)
      >>> xi = jnp.array([0.5, -1.0])
      >>> bool(jnp.allclose(geometric.nn.psd_encode(geometric.nn.psd_decode(xi, phi), phi), xi))
      True
    """
    _check_basis("psd_encode", z, phi, rows=True)
    return _encode(z, phi)


def psd_decode(xi: jax.Array, phi: jax.Array) -> jax.Array:
    r"""The full state ``z = Φ ξ`` of reduced coordinates ``ξ`` in a PSD-like basis ``Φ``.

    For ``Φ ∈ SpSt(2N, 2n)``, ``ΦᵀJ_{2N}Φ = J_{2n}``: a linear symplectic immersion.

    Args:
      xi: ``(..., 2n)`` reduced coordinates, real floats.
      phi: ``(2N, 2n)``, a point of ``geometric.SymplecticStiefel(N, n)``.

    Returns:
      ``z``, ``(..., 2N)``.

    Raises:
      TypeError: ``xi`` or ``phi`` is not a float32/float64 array.
      ValueError: ``phi`` is not ``(2N, 2n)`` with even sides; ``xi`` is not ``(..., 2n)``.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn
      >>> phi = jnp.eye(4)[:, [0, 2]]  # (q₁, p₁) of a system with N = 2
      >>> print(geometric.nn.psd_decode(jnp.array([1.0, 2.0]), phi))
      [1. 0. 2. 0.]
    """
    _check_basis("psd_decode", xi, phi, rows=False)
    return _decode(xi, phi)


def reduced_vector_field(hamiltonian: Callable[[jax.Array], jax.Array],
                         decoder: Callable[[jax.Array], jax.Array]
                         ) -> Callable[[jax.Array], jax.Array]:
    r"""The reduced model of a Hamiltonian system on a symplectic decoder: Hamiltonian itself.

    .. math::
        f(\xi) = J_{2n}\nabla_\xi (H\circ\psi)(\xi)
               = J_{2n}\,D\psi(\xi)^T\,\nabla H(\psi(\xi))
               = D\psi(\xi)^+\, X_H(\psi(\xi))

    with ``X_H = J_{2N}∇H`` and ``A⁺ = J_{2n}ᵀAᵀJ_{2N}``: for a symplectic decoder ``ψ``
    (``DψᵀJDψ = J``: :func:`psd_decode`, :meth:`SymplecticAutoencoder.decode`) this is the
    symplectic Galerkin projection of the full vector field, and the reduced system is
    Hamiltonian with ``H̃ = H∘ψ``: a symplectic integrator of ``f`` conserves ``H̃`` to its
    order, for all times it can (Brantner & Kraus 2023, §2).

    Args:
      hamiltonian: ``H``, maps ``z`` of shape ``(..., 2N)`` to ``(...)`` (or a scalar for one
        point).
      decoder: ``ψ``, maps ``ξ`` of shape ``(..., 2n)`` to ``(..., 2N)`` point by point, e.g.
        ``functools.partial(autoencoder.decode, params)``.

    Returns:
      ``f``, mapping ``ξ`` of shape ``(..., 2n)`` to ``ξ̇`` of the same shape. With leading axes,
      ``f`` differentiates ``Σ H(ψ(ξ))``: the points must not interact in ``H∘ψ``.

    Raises:
      TypeError: (when ``f`` is called) ``ξ`` is not a float32/float64 array.
      ValueError: (when ``f`` is called) ``ξ`` is not ``(..., 2n)`` with even ``2n``.

    References:
      P. Buchfink, A. Bhatt, B. Haasdonk, "Symplectic model order reduction with non-orthonormal
      bases", Math. Comput. Appl. 24 (2019), https://arxiv.org/abs/1903.06799.
      B. Brantner, M. Kraus, "Symplectic autoencoders for model reduction of Hamiltonian
      systems" (2023), https://arxiv.org/abs/2312.10004.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn
      >>> phi = jnp.eye(4)[:, [0, 2]]
      >>> h = lambda z: 0.5 * jnp.sum(z ** 2, axis=-1)  # two oscillators
      >>> f = geometric.nn.reduced_vector_field(h, lambda xi: geometric.nn.psd_decode(xi, phi))
      >>> print(f(jnp.array([1.0, 0.0])))  # q̇ = p, ṗ = -q
      [ 0. -1.]
    """

    def vector_field(xi: jax.Array) -> jax.Array:
        name = "reduced_vector_field"
        _check_phase_space(name, "xi", xi)
        grad = jax.grad(lambda x: jnp.sum(hamiltonian(decoder(x))))(xi)
        return _j(grad)

    return vector_field


@dataclasses.dataclass(frozen=True)
class SymplecticAutoencoder:
    r"""GML's symplectic autoencoder: SympNet gradient layers between PSD-like layers.

    .. math::
        \Psi^e = A_K^+\circ\varphi_{K}\circ\cdots\circ A_1^+\circ\varphi_1, \qquad
        \Psi^d = B_L\circ\chi_{L}\circ\cdots\circ B_1\circ\chi_1
        \;(\circ\,\chi_{\mathrm{out}})

    ``φ_i, χ_i``: compositions of gradient layers (:func:`gradient_q` / :func:`gradient_p`,
    alternating, ``q`` first with ``encoder_init_q`` / ``decoder_init_q``), ``n_encoder_layers``
    (``n_decoder_layers``) of them per block, with upscaling dimension ``h = sympnet_upscale · m``
    at a block of dimension ``2m``; ``A_i, B_i`` PSD-like matrices, points of
    :class:`geometric.SymplecticStiefel` (``2M × 2m`` for a layer between dimensions ``2M >
    2m``), ``A⁺ = J_{2m}ᵀAᵀJ_{2M}`` the symplectic inverse (:func:`psd_encode`). The decoder is
    a symplectic immersion, ``(DΨᵈ)ᵀ J_{2N} DΨᵈ = J_{2n}``, and the encoder a symplectic
    submersion, ``DΨᵉ J_{2N} (DΨᵉ)ᵀ = J_{2n}``, for every parameter value, so
    :func:`reduced_vector_field` on the decoder is a Hamiltonian reduced model.

    The dimensions between blocks are GML's: ``2·(n, n + s, n + 2s, …)`` with ``s = ⌊(N -
    n)/(blocks - 1)⌋``, the last replaced by ``2N`` (:attr:`encoder_dims`,
    :attr:`decoder_dims`); the encoder runs them downwards. ``n_decoder_output_layers`` gradient
    layers at ``2N`` may follow the decoder's last PSD-like layer (GML's option; 0: the decoder
    ends linear).

    GML's PSD-like weights are ``blockdiag(Φ, Φ)`` with ``Φ`` on a Stiefel manifold (then
    ``A⁺ = Aᵀ``); here they may be any point of the symplectic Stiefel manifold, which contains
    those. :meth:`init` starts from GML's ``blockdiag(Φ, Φ)``, ``Φ`` the Q factor of a Gaussian
    matrix; gradient layers start with a Glorot-uniform weight and scale and a zero bias (GML's
    ``GradientLayer`` defaults).

    Parameters are ``{"encoder": layers, "decoder": layers}``, each a tuple of dicts:
    ``{"weight": (h, m), "scale": (h,), "bias": (h,)}`` for a gradient layer, ``{"basis": (2M,
    2m)}`` for a PSD-like layer. :meth:`manifolds` gives the ``geometric.optim`` spec.

    Args:
      full_dim: ``2N``, even.
      reduced_dim: ``2n``, even, ``< full_dim``.
      n_encoder_layers: gradient layers per encoder block (GML: 4).
      n_encoder_blocks: ``≥ 2``, the length of GML's dimension sequence of the encoder (2: one
        PSD-like layer), at most ``(full_dim - reduced_dim)/2 + 1``.
      n_decoder_layers: gradient layers per decoder block (GML: 1).
      n_decoder_blocks: as ``n_encoder_blocks``, for the decoder (GML: 3).
      n_decoder_output_layers: gradient layers after the decoder's last PSD-like layer (GML: 0).
      sympnet_upscale: the upscaling factor of the gradient layers (GML: 5).
      activation: ``σ`` of the gradient layers.
      encoder_init_q: the first gradient layer of each encoder block is a ``q`` layer.
      decoder_init_q: the first gradient layer of each decoder block is a ``q`` layer.

    Raises:
      TypeError: a size is not an int, a flag not a bool, ``activation`` not callable.
      ValueError: a dimension is odd, ``reduced_dim ≥ full_dim``, a block count out of range, a
        layer count negative.

    References:
      B. Brantner, M. Kraus, "Symplectic autoencoders for model reduction of Hamiltonian
      systems" (2023), https://arxiv.org/abs/2312.10004.
      GeometricMachineLearning.jl, ``SymplecticAutoencoder`` and ``PSDLayer``.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn
      >>> ae = geometric.nn.SymplecticAutoencoder(20, 4)
      >>> params = ae.init(jax.random.PRNGKey(0), jnp.float64)
      >>> z = jax.random.normal(jax.random.PRNGKey(1), (5, 20))
      >>> ae.encode(params, z).shape, ae(params, z).shape, ae.decoder_dims
      ((5, 4), (5, 20), (4, 12, 20))
      >>> d = jax.jacfwd(lambda xi: ae.decode(params, xi))(jnp.ones(4))  # (20, 4)
      >>> j = lambda m: jnp.block([[jnp.zeros((m, m)), jnp.eye(m)], [-jnp.eye(m), jnp.zeros((m, m))]])
      >>> bool(jnp.allclose(d.T @ j(10) @ d, j(2), atol=1e-12))
      True
    """

    full_dim: int
    reduced_dim: int
    _: dataclasses.KW_ONLY
    n_encoder_layers: int = 4
    n_encoder_blocks: int = 2
    n_decoder_layers: int = 1
    n_decoder_blocks: int = 3
    n_decoder_output_layers: int = 0
    sympnet_upscale: int = 5
    activation: Callable[[jax.Array], jax.Array] = jnp.tanh
    encoder_init_q: bool = True
    decoder_init_q: bool = True

    def __post_init__(self) -> None:
        owner = "SymplecticAutoencoder"
        for field in ("full_dim", "reduced_dim"):
            value = check_int_field(owner, field, getattr(self, field), minimum=2)
            if value % 2:
                raise ValueError(f"{owner}: `{field}` must be even (a phase space (q, p)); "
                                 f"got {value}.")
            object.__setattr__(self, field, value)
        if self.reduced_dim >= self.full_dim:
            raise ValueError(f"{owner}: `reduced_dim` must be smaller than full_dim = "
                             f"{self.full_dim}; got {self.reduced_dim}.")
        for field in ("n_encoder_layers", "n_decoder_layers", "n_decoder_output_layers"):
            object.__setattr__(self, field, check_int_field(owner, field, getattr(self, field),
                                                            minimum=0))
        object.__setattr__(self, "sympnet_upscale",
                           check_int_field(owner, "sympnet_upscale", self.sympnet_upscale))
        most = (self.full_dim - self.reduced_dim) // 2 + 1
        for field in ("n_encoder_blocks", "n_decoder_blocks"):
            value = check_int_field(owner, field, getattr(self, field), minimum=2)
            if value > most:
                # GML asserts blocks ≤ full_dim - reduced_dim, which admits a zero step
                raise ValueError(f"{owner}: `{field}` must be at most (full_dim - reduced_dim)/2"
                                 f" + 1 = {most}; got {value}.")
            object.__setattr__(self, field, value)
        for field in ("encoder_init_q", "decoder_init_q"):
            check_bool_field(owner, field, getattr(self, field))
        if not callable(self.activation):
            raise TypeError(f"{owner}: `activation` must be callable; got "
                            f"{type(self.activation).__name__}.")

    @property
    def encoder_dims(self) -> tuple[int, ...]:
        """The dimensions the encoder passes through, from ``full_dim`` down to ``reduced_dim``."""
        return self._dims(self.n_encoder_blocks)[::-1]

    @property
    def decoder_dims(self) -> tuple[int, ...]:
        """The dimensions the decoder passes through, from ``reduced_dim`` up to ``full_dim``."""
        return self._dims(self.n_decoder_blocks)

    def init(self, key: jax.Array, dtype: Any = jnp.float32) -> Params:
        """Initial parameters (GML's initialisation; see the class docstring).

        Args:
          key: a PRNG key.
          dtype: float32 or float64.

        Returns:
          ``{"encoder": layers, "decoder": layers}``.

        Raises:
          TypeError: ``dtype`` is not float32 or float64.
        """
        dtype = check_real_dtype("SymplecticAutoencoder.init", dtype)
        k_encoder, k_decoder = jax.random.split(key)
        return {"encoder": _init_layers(k_encoder, self._encoder_plan(), self.sympnet_upscale,
                                        dtype),
                "decoder": _init_layers(k_decoder, self._decoder_plan(), self.sympnet_upscale,
                                        dtype)}

    def manifolds(self, params: Params) -> dict[str, tuple[dict[str, Any], ...]]:
        """The ``geometric.optim`` spec of ``params``: SymplecticStiefel at every PSD-like basis.

        Args:
          params: parameters of this autoencoder (:meth:`init`'s structure).

        Returns:
          A pytree like ``params`` with ``geometric.SymplecticStiefel(M, m)`` at each ``basis``
          of shape ``(2M, 2m)`` and None at every other leaf, for
          ``geometric.optim.riemannian_adam(learning_rate, ae.manifolds(params))`` and the other
          optimizers of :mod:`geometric.optim`.
        """
        def layer_spec(layer: dict[str, jax.Array]) -> dict[str, Any]:
            if "basis" in layer:
                rows, cols = layer["basis"].shape[-2:]
                return {"basis": SymplecticStiefel(rows // 2, cols // 2)}
            return {name: None for name in layer}

        return {part: tuple(layer_spec(layer) for layer in params[part])
                for part in ("encoder", "decoder")}

    def encode(self, params: Params, z: jax.Array) -> jax.Array:
        """``Ψᵉ(z)``: ``(..., full_dim) → (..., reduced_dim)``.

        Raises:
          TypeError: ``z`` is not a float32/float64 array.
          ValueError: ``z`` is not ``(..., full_dim)``.
        """
        self._check_input("encode", "z", z, self.full_dim)
        return self._run(self._encoder_plan(), params["encoder"], z)

    def decode(self, params: Params, xi: jax.Array) -> jax.Array:
        """``Ψᵈ(ξ)``: ``(..., reduced_dim) → (..., full_dim)``, a symplectic immersion.

        Raises:
          TypeError: ``xi`` is not a float32/float64 array.
          ValueError: ``xi`` is not ``(..., reduced_dim)``.
        """
        self._check_input("decode", "xi", xi, self.reduced_dim)
        return self._run(self._decoder_plan(), params["decoder"], xi)

    def __call__(self, params: Params, z: jax.Array) -> jax.Array:
        """``Ψᵈ(Ψᵉ(z))``, the reconstruction of ``z``: ``(..., full_dim) → (..., full_dim)``."""
        return self.decode(params, self.encode(params, z))

    # ------------------------------------------------------------------------------------------

    def _dims(self, blocks: int) -> tuple[int, ...]:
        small, big = self.reduced_dim // 2, self.full_dim // 2
        halves = list(range(small, big + 1, (big - small) // (blocks - 1)))
        halves[-1] = big
        return tuple(2 * h for h in halves)

    def _plan(self, dims: tuple[int, ...], n_layers: int, init_q: bool, psd: str
              ) -> tuple[tuple[str, int, int], ...]:
        """Layers as ``(kind, rows, cols)``: kind ``"q"``/``"p"`` (cols: half the dimension),
        or ``psd`` (``"encode"``/``"decode"``) with the basis shape ``(rows, cols)``."""
        first, second = ("q", "p") if init_q else ("p", "q")
        plan: list[tuple[str, int, int]] = []
        for dim, following in itertools.pairwise(dims):
            plan += [(first if i % 2 == 0 else second, 0, dim // 2) for i in range(n_layers)]
            plan.append((psd, max(dim, following), min(dim, following)))
        return tuple(plan)

    def _encoder_plan(self) -> tuple[tuple[str, int, int], ...]:
        return self._plan(self.encoder_dims, self.n_encoder_layers, self.encoder_init_q, "encode")

    def _decoder_plan(self) -> tuple[tuple[str, int, int], ...]:
        plan = self._plan(self.decoder_dims, self.n_decoder_layers, self.decoder_init_q, "decode")
        first, second = ("q", "p") if self.decoder_init_q else ("p", "q")
        return plan + tuple((first if i % 2 == 0 else second, 0, self.full_dim // 2)
                            for i in range(self.n_decoder_output_layers))

    def _run(self, plan: tuple[tuple[str, int, int], ...],
             layers: tuple[dict[str, jax.Array], ...], z: jax.Array) -> jax.Array:
        for (kind, _, _), layer in zip(plan, layers, strict=True):
            if kind == "encode":
                z = _encode(z, layer["basis"])
            elif kind == "decode":
                z = _decode(z, layer["basis"])
            else:
                shear = gradient_q if kind == "q" else gradient_p
                z = shear(z, layer["weight"], layer["scale"], layer["bias"],
                          activation=self.activation)
        return z

    def _check_input(self, method: str, argname: str, x: Any, dim: int) -> None:
        name = f"SymplecticAutoencoder.{method}"
        check_array(name, argname, x, dtypes=REAL_DTYPES)
        if x.ndim < 1 or x.shape[-1] != dim:
            raise ValueError(f"{name}: `{argname}` must have shape (..., {dim}); "
                             f"got {tuple(x.shape)}.")


def _init_layers(key: jax.Array, plan: tuple[tuple[str, int, int], ...], upscale: int,
                 dtype: jnp.dtype) -> tuple[dict[str, jax.Array], ...]:
    layers = []
    for (kind, rows, cols), k in zip(plan, jax.random.split(key, len(plan))):
        if kind in ("encode", "decode"):
            frame = householder_qr_factor(jax.random.normal(k, (rows // 2, cols // 2), dtype))
            zero = jnp.zeros_like(frame)
            layers.append({"basis": jnp.block([[frame, zero], [zero, frame]])})
        else:
            h = upscale * cols
            k_weight, k_scale = jax.random.split(k)
            layers.append({"weight": glorot_uniform(k_weight, (h, cols), dtype),
                           "scale": glorot_uniform(k_scale, (h,), dtype),
                           "bias": jnp.zeros((h,), dtype)})
    return tuple(layers)


def _j(z: jax.Array) -> jax.Array:
    """``J z = (p, -q)`` along the last axis."""
    n = z.shape[-1] // 2
    return jnp.concatenate([z[..., n:], -z[..., :n]], axis=-1)


def _encode(z: jax.Array, phi: jax.Array) -> jax.Array:
    u = jnp.matmul(_j(z), phi, precision=HIGHEST)  # (Φᵀ J z)ᵀ
    return -_j(u)  # Jᵀ = -J


def _decode(xi: jax.Array, phi: jax.Array) -> jax.Array:
    return jnp.matmul(xi, phi.mT, precision=HIGHEST)


def _even_dim(fname: str, argname: str, value: object) -> int:
    dim = check_int_field(fname, argname, value, minimum=2)
    if dim % 2:
        raise ValueError(f"{fname}: `{argname}` must be even; got {dim}.")
    return dim


def _check_phase_space(fname: str, argname: str, x: Any) -> None:
    check_array(fname, argname, x, dtypes=REAL_DTYPES)
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(f"{fname}: `{argname}` must have shape (..., 2n) with an even last "
                         f"axis; got {tuple(x.shape)}.")


def _check_basis(fname: str, x: Any, phi: Any, *, rows: bool) -> None:
    """``phi`` a ``(2N, 2n)`` basis and ``x`` of shape ``(..., 2N)`` (``rows``) or ``(..., 2n)``."""
    check_matrix(fname, "phi", phi, dtypes=REAL_DTYPES)
    if phi.ndim != 2 or phi.shape[0] % 2 or phi.shape[1] % 2:
        raise ValueError(f"{fname}: `phi` must have shape (2N, 2n) with even sides; "
                         f"got {tuple(phi.shape)}.")
    argname, dim = ("z", phi.shape[0]) if rows else ("xi", phi.shape[1])
    check_array(fname, argname, x, dtypes=REAL_DTYPES)
    if x.ndim < 1 or x.shape[-1] != dim:
        raise ValueError(f"{fname}: `{argname}` must have shape (..., {dim}) for `phi` of shape "
                         f"{tuple(phi.shape)}; got {tuple(x.shape)}.")
