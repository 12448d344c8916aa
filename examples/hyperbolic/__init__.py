"""Poincaré embeddings of a tree-shaped hierarchy (Nickel & Kiela 2017), against Euclidean ones.

See docs/examples/hyperbolic.md; run ``python -m examples.hyperbolic.train``.
"""
