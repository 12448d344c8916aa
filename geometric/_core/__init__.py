"""Machinery shared by the manifolds and the optimizers.

* :mod:`.manifold`: :class:`AbstractManifold`, the template every manifold fills in with hooks;
* :mod:`.frames`: :class:`~geometric._core.frames.AbstractFrameManifold`, the hooks St(n, p),
  Gr(n, p) and O(n) share (Haar points, polar projection, ``‖YᵀY − I‖_F``, the ``(n, p)`` or
  transposed layout);
* :mod:`.rotations`: the low-rank rotations ``cay(Ω)`` and ``exp(Ω)`` of frames;
* :mod:`.arrays`: elementwise helpers (symmetric and skew parts, the Frobenius inner product, a
  square root with a subgradient at 0);
* :mod:`.hyperbolic`: the kernels of the Poincaré ball and the hyperboloid (Möbius operations,
  removable singularities, the safe ball) and their shared base class;
* :mod:`.checks`: checks of constructor fields and dtypes;
* :mod:`.tree`: walking a ``manifolds`` pytree alongside ``params``.

Nothing here is public; :mod:`geometric` re-exports what is. The linear algebra is ``rules``': the
rules (``rules.eigh``, ``rules.cholesky``, ``rules.solve``, ``rules.expm``) where a derivative may
flow, and the kernel layer (:mod:`rules.internal`: QR and polar factors, ``φ``, the one symmetric
matrix function) for the rest.
"""
