r"""Solvers that minimise a cost over a manifold, each solve one XLA program.

``solver(cost, manifold, x0, **options) -> SolverResult``:

* :func:`steepest_descent`: gradient steps with Armijo backtracking;
* :func:`conjugate_gradient`: nonlinear conjugate gradients (Fletcher–Reeves, Polak–Ribière+,
  Hestenes–Stiefel+, Hager–Zhang), directions carried by vector transport;
* :func:`lbfgs`: limited-memory Riemannian BFGS (Huang, Gallivan & Absil), its memory transported;
* :func:`trust_region`: Riemannian trust regions (Absil, Baker & Gallivan) with truncated
  conjugate gradients on the exact Riemannian Hessian (forward over reverse differentiation).

``cost`` is a JAX function of the point; ``manifold`` a manifold, or for a point that is a pytree
a spec as in :mod:`geometric.optim` (a product manifold, None leaves Euclidean). Every solve is a
``lax.while_loop``: it runs under ``jax.jit``, under ``jax.vmap`` over a batch of problems (each
stopping on its own criterion), in float32 and float64, on every backend. The common options are
``gradient_tolerance``, ``cost_tolerance``, ``step_tolerance``, ``max_iterations`` and
``history``; :data:`REASONS` names the stopping reasons. See the docs page "Solving problems on
manifolds" (``docs/solvers.md``).
"""
from ._conjugate_gradient import conjugate_gradient
from ._lbfgs import lbfgs
from ._result import REASONS, SolverResult
from ._steepest_descent import steepest_descent
from ._trust_region import trust_region

__all__ = ["REASONS", "SolverResult", "conjugate_gradient", "lbfgs", "steepest_descent",
           "trust_region"]
