"""Machinery shared by the manifolds and the optimizers.

* :mod:`.manifold`: :class:`AbstractManifold`, the template every manifold fills in with hooks;
* :mod:`.frames`: :class:`~geometric._core.frames.AbstractFrameManifold`, the hooks St(n, p), Gr(n, p) and O(n) share
  (Haar points, polar projection, ``‖YᵀY − I‖_F``, the ``(n, p)`` or transposed layout);
* :mod:`.kernels`: the numerical kernels (QR and polar factors, low-rank rotations, φ, functions
  of symmetric matrices with a closed-form 2×2 eigendecomposition);
* :mod:`.hyperbolic`: the kernels of the Poincaré ball and the hyperboloid (Möbius operations,
  removable singularities, the safe ball) and their shared base class;
* :mod:`.checks`: checks of constructor fields and dtypes;
* :mod:`.tree`: walking a ``manifolds`` pytree alongside ``params``.

Nothing here is public; :mod:`geometric` re-exports what is.
"""
