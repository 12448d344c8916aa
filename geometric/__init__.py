"""Manifolds, Riemannian gradients, retractions and optax optimizers for constrained weights."""

__all__: list[str] = []
