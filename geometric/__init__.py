"""Manifolds, Riemannian gradients, retractions and optax optimizers for constrained weights.

Manifolds (:class:`Stiefel`, :class:`Grassmann`, :class:`Sphere`, :class:`Orthogonal`,
:class:`PoincareBall`, :class:`Lorentz`, :class:`SPD`, :class:`Oblique`,
:class:`SymplecticStiefel`) are hashable frozen dataclasses; a ``manifolds`` pytree
mirrors ``params`` with a manifold or None (Euclidean) per leaf. Optimizers live in
:mod:`geometric.optim`; the operations hyperbolic layers are built from in
:mod:`geometric.hyperbolic`; solvers that minimise a cost over a manifold in
:mod:`geometric.solvers`; structure-preserving networks (SympNets, symplectic attention and
transformers, symplectic autoencoders) in :mod:`geometric.nn`.
"""
from rules import __version__ as __version__  # one distribution, one version

from . import hyperbolic as hyperbolic
from . import nn as nn
from . import optim as optim
from . import solvers as solvers
from ._diagnostics import CheckResult as CheckResult
from ._diagnostics import check_gradient as check_gradient
from ._diagnostics import check_hessian as check_hessian
from ._core.manifold import AbstractManifold as AbstractManifold
from ._gradient import riemannian_gradient as riemannian_gradient
from ._manifolds.grassmann import Grassmann as Grassmann
from ._manifolds.lorentz import Lorentz as Lorentz
from ._manifolds.oblique import Oblique as Oblique
from ._manifolds.orthogonal import Orthogonal as Orthogonal
from ._manifolds.poincare_ball import PoincareBall as PoincareBall
from ._manifolds.spd import SPD as SPD
from ._manifolds.sphere import Sphere as Sphere
from ._manifolds.stiefel import Stiefel as Stiefel
from ._manifolds.symplectic_stiefel import SymplecticStiefel as SymplecticStiefel

__all__ = ["SPD", "AbstractManifold", "CheckResult", "Grassmann", "Lorentz", "Oblique", "Orthogonal",
           "PoincareBall", "Sphere", "Stiefel", "SymplecticStiefel", "check_gradient",
           "check_hessian", "hyperbolic", "nn", "optim", "riemannian_gradient", "solvers"]
