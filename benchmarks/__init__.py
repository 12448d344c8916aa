"""Benchmarks: each rule against JAX's own autodiff of the same function (``python -m benchmarks``)."""
