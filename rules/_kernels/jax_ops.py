"""JAX's own linear-algebra functions, bound when ``rules`` is imported.

A user may make our rules stand in for JAX's (``jnp.linalg.qr = rules.qr``); our forwards call
JAX's functions through this module, so they never call the rules themselves.
"""
import jax
import jax.numpy as jnp

cholesky = jnp.linalg.cholesky
det = jnp.linalg.det
eigh = jnp.linalg.eigh
expm = jax.scipy.linalg.expm
inv = jnp.linalg.inv
qr = jnp.linalg.qr
slogdet = jnp.linalg.slogdet
solve = jnp.linalg.solve
svd = jnp.linalg.svd
