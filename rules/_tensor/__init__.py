"""Batched tensor products and packed structured matrices."""
