"""Symplectic autoencoders against proper symplectic decomposition on the linear wave equation.

The experiment of Brantner & Kraus (arXiv:2312.10004): reduce a discretised Hamiltonian PDE whose
solutions are transported waves to ``2n = 2, 4, 6`` dimensions, once linearly (proper symplectic
decomposition, :func:`geometric.nn.cotangent_lift`) and once with a symplectic autoencoder
(:class:`geometric.nn.SymplecticAutoencoder`, its PSD-like weights on the symplectic Stiefel
manifold), and compare the reconstruction of the snapshots and the reduced Hamiltonian models'
predictions at parameters outside the training set.

Modules: :mod:`.data` (the full-order model, its implicit-midpoint solutions, the snapshots),
:mod:`.train` (``python -m examples.symplectic_autoencoder.train``: trains one autoencoder per
reduced dimension, evaluates, plots) and :mod:`.evaluate` (the reduced models, the errors, the
plots and table; ``python -m examples.symplectic_autoencoder.evaluate RUN`` re-evaluates a run).
"""
