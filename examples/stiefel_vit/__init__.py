"""A vision transformer on scikit-learn's 8×8 digits with attention projections on the Stiefel manifold.

Modules: :mod:`.data` (digits as patch sequences), :mod:`.model` (the network and its ``manifolds``
pytree), :mod:`.train` (one optimizer, ``python -m examples.stiefel_vit.train``) and :mod:`.demo`
(``manifold_adam`` and ``riemannian_adam`` against unconstrained ``optax.adam``).
"""
