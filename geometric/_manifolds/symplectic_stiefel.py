r"""The symplectic Stiefel manifold SpSt(2n, 2k)."""
from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp

import rules
from rules.internal import eye_like, householder_qr_factor, mm

from .._core.checks import check_int_field
from .._core.arrays import frobenius_inner, skew, sym
from .._core.manifold import AbstractManifold

__all__ = ["SymplecticStiefel"]

# Newton steps of project_point: the constraint error squares each step, so 5 steps take an
# error of 0.1 below float64 rounding.
_PROJECTION_STEPS = 5


@dataclasses.dataclass(frozen=True)
class SymplecticStiefel(AbstractManifold):
    r"""2n×2k matrices whose columns span a symplectic subspace with a symplectic basis.

    .. math::
        \mathrm{SpSt}(2n, 2k) = \{X \in \mathbb{R}^{2n\times 2k} : X^TJ_{2n}X = J_{2k}\},
        \qquad J_{2m} = \begin{bmatrix} 0 & I_m \\ -I_m & 0 \end{bmatrix},
        \qquad T_X = \{Z : X^TJ_{2n}Z \in \mathrm{Sym}(2k)\}

    (``k ≤ n``; for ``k = n`` the symplectic group Sp(2n)). Used for symplectic autoencoders and
    model reduction of Hamiltonian systems, and for symplectic eigenvalue problems.

    * ``project`` is the Euclidean-orthogonal projection ``P_X(Z) = Z - J X Ω``, ``Ω`` skew with
      ``GΩ + ΩG = -2 skew(XᵀJZ)``, ``G = XᵀX``: a 2k×2k Lyapunov equation solved in the
      eigenbasis of ``G`` (the normal space is ``{JXΩ : Ω skew}``).
    * The metric is the *canonical-like* metric of Gao, Son, Absil & Stykel (2021),
      ``g(Z₁, Z₂) = tr(Z₁ᵀ(I - ½JX G⁻¹XᵀJᵀ)Z₂G⁻¹)``, whose Riesz map needs no solve:
      ``egrad_to_rgrad(X, E) = E XᵀX + J X Eᵀ J X`` (it is tangent, but not the projection of
      ``E``). ``inner`` costs one 2k×2k solve.
    * The Riemannian Hessian is the Levi-Civita derivative of the gradient field,
      ``Hess f(X)[Z] = Π_X(D grad f(X)[Z] + Γ_X(Z, grad f(X)))``, in closed form: the metric is
      ``⟨Z₁, 𝒢_X Z₂⟩`` for the operator ``𝒢_X Z = (I - ½JXG⁻¹XᵀJᵀ)ZG⁻¹``, defined and positive
      definite for every 2n×2k ``X`` of full rank, ``Γ`` its Christoffel function (the Koszul
      formula, ``Γ(U, W) = ½𝒢⁻¹(D𝒢[U]W + D𝒢[W]U - χ(U, W))`` with ``⟨χ(U, W), Z⟩ =
      ⟨D𝒢[Z]U, W⟩`` and ``𝒢⁻¹W = (I + JXG⁻¹XᵀJᵀ)WG``), and ``Π_X(Z) = Z + JXG⁻¹skew(XᵀJZ)``
      the projection orthogonal in the metric (``docs/derivations/riemannian-hessians.md``).
      O(nk²) time, like the gradient.
    * The retraction is Gao et al.'s Cayley retraction
      ``R_X(Z) = (I - ½H)⁻¹(I + ½H)X`` with the Hamiltonian ``H = S J``,
      ``S = UXᵀ_J + X_JUᵀ``, ``X_J = XJ_{2k}``, ``U = (I + ½X J_{2k} XᵀJ_{2n})Z`` (``HX = Z``).
      ``H = ABᵀ`` has rank ``≤ 4k`` (``A = [U, X_J]``, ``B = J_{2n}ᵀ[X_J, U]``), so by
      Sherman–Morrison–Woodbury ``R_X(Z) = X + A(I - ½BᵀA)⁻¹BᵀX``: one 4k×4k solve,
      O(nk²) time, no 2n×2n array. ``cay(H)`` is a symplectic matrix, so the retraction keeps
      ``XᵀJX`` exactly, rounding errors included: it does not correct itself, and the
      optimizers re-project every 100 steps.
    * :meth:`project_point` moves ``X`` to ``XM``: Newton steps ``M ← I + ½J_{2k}(XᵀJX - J_{2k})``
      (quadratic convergence; a point near ``X`` on the manifold, not the nearest one, which has
      no closed form). Vector transport is the projection onto the new tangent space;
      :meth:`manifold_error` is ``‖XᵀJX - J‖_F``.
    * Random points: ``[[I, 0], [S, I]] · Q · E · diag(eᵈ, e⁻ᵈ)`` with ``Q`` the orthosymplectic
      matrix of a Haar unitary, ``E`` the first ``k`` columns of each half of ``I_{2n}``, a
      Gaussian symmetric ``S`` of spectral radius ≈ ½ and ``d ~ N(0, ¼)`` (the manifold is not
      compact: there is no uniform distribution).

    No ``exp``, ``log`` or ``dist`` (no closed forms).

    Args:
      n: half the number of rows, ``n ≥ k``.
      k: half the number of columns, ``k ≥ 1``.

    Raises:
      TypeError: ``n`` or ``k`` is not an int.
      ValueError: ``k < 1`` or ``k > n``.

    References:
      B. Gao, N. T. Son, P.-A. Absil, T. Stykel, "Riemannian optimization on the symplectic
      Stiefel manifold", SIAM J. Optim. 31 (2021), https://arxiv.org/abs/2006.15226.
      Derivations: ``docs/derivations/manifolds.md#symplectic-stiefel``.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> sp = geometric.SymplecticStiefel(3, 1)
      >>> x = sp.random_point(jax.random.PRNGKey(0), jnp.float64)
      >>> z = sp.random_tangent(jax.random.PRNGKey(1), x)
      >>> x.shape, bool(sp.manifold_error(sp.retract(x, 0.1 * z)) < 1e-12)
      ((6, 2), True)
    """

    n: int
    k: int

    self_correcting: ClassVar[bool] = False
    _error_formula: ClassVar[str] = "‖xᵀJx − J‖_F"

    def __post_init__(self) -> None:
        n = check_int_field("SymplecticStiefel", "n", self.n)
        k = check_int_field("SymplecticStiefel", "k", self.k)
        if k > n:
            raise ValueError(f"SymplecticStiefel: `k` must satisfy k ≤ n = {n}; got k = {k}.")
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "k", k)

    @property
    def shape(self) -> tuple[int, int]:
        return (2 * self.n, 2 * self.k)

    @property
    def dim(self) -> int:
        # 4nk entries, k(2k - 1) independent equations in the skew-symmetric XᵀJX = J.
        return 4 * self.n * self.k - self.k * (2 * self.k - 1)

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        n, k = self.n, self.k
        k_unitary, k_shear, k_stretch = jax.random.split(key, 3)
        complex_dtype = jnp.result_type(dtype, jnp.complex64)
        # Haar (no LAPACK phase gauge: Mezzadri)
        q = householder_qr_factor(jax.random.normal(k_unitary, (n, k), complex_dtype))
        a, b = q.real.astype(dtype), q.imag.astype(dtype)
        x = jnp.block([[a, -b], [b, a]])  # Q E for the orthosymplectic Q = [[A, -B], [B, A]]
        s = sym(jax.random.normal(k_shear, (n, n), dtype)) / math.sqrt(8 * n)
        x = x.at[n:].add(s @ x[:n])  # [[I, 0], [S, I]] is symplectic for symmetric S
        stretch = jnp.exp(0.5 * jax.random.normal(k_stretch, (k,), dtype))
        return x * jnp.concatenate([stretch, 1 / stretch])[None, :]

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        w, q = rules.eigh(mm(x.mT, x))
        rhs = mm(q.mT, mm(-2 * skew(mm(x.mT, self._j(v))), q))
        omega = mm(q, mm(rhs / (w[..., :, None] + w[..., None, :]), q.mT))
        return v - self._j(mm(x, omega))

    def _project_point(self, x: jax.Array) -> jax.Array:
        for _ in range(_PROJECTION_STEPS):
            x = x + 0.5 * mm(x, self._j_small(self._constraint_error(x), left=True))
        return x

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        return jnp.linalg.norm(self._constraint_error(x), axis=(-2, -1))

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        return mm(g, mm(x.mT, x)) + self._j(mm(x, mm(g.mT, self._j(x))))

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        gram = mm(x.mT, x)
        pu, pv = mm(x.mT, self._j(u)), mm(x.mT, self._j(v))  # -XᵀJᵀU; the signs cancel
        solved = rules.solve(gram, jnp.concatenate([v.mT, pv], axis=-1))  # G⁻¹[Vᵀ, P_V]
        v_g = solved[..., : 2 * self.n].mT  # V G⁻¹
        g_pv_g = rules.solve(gram, solved[..., 2 * self.n:].mT).mT  # G⁻¹P_V G⁻¹ (G sym)
        return frobenius_inner(u, v_g) - 0.5 * frobenius_inner(pu, g_pv_g)

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        # Hess f(X)[V] = Π(D grad f(X)[V] + Γ(V, grad f(X))), with 𝒢Z = ZM - ½PZM, M = G⁻¹,
        # P = AMAᵀ, A = JX: docs/derivations/riemannian-hessians.md#symplectic-stiefel.
        gram = mm(x.mT, x)
        m = rules.solve(gram, eye_like(gram))
        a = self._j(x)
        rgrad = self._egrad_to_rgrad(x, egrad)  # EG + JXEᵀJX
        d_rgrad = (mm(ehess, gram) + mm(egrad, _twice_sym(mm(v.mT, x)))
                   + self._j(mm(v, mm(egrad.mT, a)) + mm(x, mm(ehess.mT, a))
                             + mm(x, mm(egrad.mT, self._j(v)))))

        def d_metric(u: jax.Array, z: jax.Array) -> jax.Array:  # D𝒢[U]Z
            m_dot = -mm(m, mm(_twice_sym(mm(u.mT, x)), m))
            a_dot = self._j(u)
            at_z_m = mm(a.mT, mm(z, m))
            return mm(z, m_dot) - 0.5 * (mm(a_dot, mm(m, at_z_m)) + mm(a, mm(m_dot, at_z_m))
                                         + mm(a, mm(m, mm(a_dot.mT, mm(z, m))))
                                         + mm(a, mm(m, mm(a.mT, mm(z, m_dot)))))

        # χ(U, W), the Z-gradient of ⟨D𝒢[Z]U, W⟩, for U = V, W = grad f
        w_m_ut_a = mm(rgrad, mm(m, mm(v.mT, a)))  # W M Uᵀ A
        u_m_wt_a = mm(v, mm(m, mm(rgrad.mT, a)))  # U M Wᵀ A
        s = (mm(v.mT, rgrad) - 0.5 * mm(a.mT, w_m_ut_a)
             - 0.5 * mm(v.mT, mm(a, mm(m, mm(a.mT, rgrad)))))  # UᵀW - ½AᵀWMUᵀA - ½UᵀPW
        t = mm(m, mm(s, m))
        chi = 0.5 * self._j(mm(w_m_ut_a + u_m_wt_a, m)) - mm(x, t + t.mT)
        w = 0.5 * (d_metric(v, rgrad) + d_metric(rgrad, v) - chi)
        w_gram = mm(w, gram)
        christoffel = w_gram + mm(a, mm(m, mm(a.mT, w_gram)))  # 𝒢⁻¹W = (I + P)WG
        z = d_rgrad + christoffel
        return z + mm(a, mm(m, skew(mm(x.mT, self._j(z)))))  # Π(Z) = Z + AM skew(XᵀJZ)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        xj = self._j_small(x)  # X J_{2k}
        u = v + 0.5 * mm(xj, mm(x.mT, self._j(v)))  # (I + ½ X J_{2k} Xᵀ J_{2n}) Z
        a = jnp.concatenate([u, xj], axis=-1)
        b = jnp.concatenate([xj, u], axis=-1)  # Bᵀ = bᵀ J_{2n}
        bt_a = mm(b.mT, self._j(a))
        bt_x = mm(b.mT, self._j(x))
        return x + mm(a, rules.solve(eye_like(bt_a) - 0.5 * bt_a, bt_x))

    # ------------------------------------------------------------------------------------------

    def _j(self, z: jax.Array) -> jax.Array:
        """``J_{2n} Z`` for ``(..., 2n, m)`` arrays: ``[Z₂; -Z₁]``."""
        return jnp.concatenate([z[..., self.n:, :], -z[..., : self.n, :]], axis=-2)

    def _j_small(self, z: jax.Array, left: bool = False) -> jax.Array:
        """``Z J_{2k}`` (``[-Z₂, Z₁]`` by columns), or ``J_{2k} Z`` with ``left``."""
        k = self.k
        if left:
            return jnp.concatenate([z[..., k:, :], -z[..., :k, :]], axis=-2)
        return jnp.concatenate([-z[..., k:], z[..., :k]], axis=-1)

    def _constraint_error(self, x: jax.Array) -> jax.Array:
        """``XᵀJX - J_{2k}`` (its skew part: the rounding of the product is not skew)."""
        e = skew(mm(x.mT, self._j(x)))
        return e - self._j_small(eye_like(e))


def _twice_sym(a: jax.Array) -> jax.Array:
    return a + a.mT
