"""The kernel layer: the numerics the rules and the manifolds are computed with.

One module per family, each choosing its routes in one place (:mod:`.routes`): small-matrix
closed forms (:mod:`.small`), products (:mod:`.products`), LU and triangular solves (:mod:`.lu`),
Cholesky (:mod:`.cholesky`), QR (:mod:`.qr`), symmetric eigendecompositions, the SVD and functions
of them (:mod:`.spectral`), the exponential and φ (:mod:`.expm`). JAX's own functions, which the
default routes call, are bound in :mod:`.jax_ops`. Nothing here imports a rule; ``geometric``
reaches these through :mod:`rules.internal`.
"""
