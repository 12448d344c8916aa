"""Pymanopt's examples, solved with :mod:`geometric.solvers`, each against its known optimum.

One module per problem (``python -m examples.solvers.<name> --help``); ``python -m
examples.solvers`` runs every problem with every solver and prints a table. Each module has the
cost (from :mod:`examples.solvers.costs`, plain ``jax.numpy``), the manifold, the optimum computed
without the solvers (an eigendecomposition, an SVD, a fixed-point iteration in NumPy), the
distance of a point to it, ``solve(data, solver, **options)`` (a pure function of the data: jit
and vmap it) and ``main``, the command line.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["NAMES", "load"]

NAMES = ("dominant_eigenvector", "dominant_invariant_subspace", "pca",
         "closest_unit_norm_column_approximation", "optimal_rotations",
         "multiple_linear_regression", "packing_on_the_sphere", "karcher_mean_spd",
         "karcher_mean_poincare")
"""The example modules, in the order of the reports."""


def load(name: str) -> ModuleType:
    """The example module ``name`` (imported on demand: ``python -m examples.solvers.<name>`` runs
    a module the package has not imported)."""
    if name not in NAMES:
        raise ValueError(f"load: unknown example {name!r}; expected one of {NAMES}")
    return importlib.import_module(f"examples.solvers.{name}")
