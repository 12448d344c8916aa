"""The rules' tests run under strict dtype promotion, as JAX's own linalg tests do: a rule (or a
derivative) that mixes dtypes implicitly — a real array with a complex one, float32 with float64 —
raises ``TypePromotionError`` there instead of upcasting quietly. Tests of what JAX does under
standard promotion (mixed-dtype inputs) are marked ``standard_promotion``; so are the cases that
run ``geometric``'s optimizers, since optax promotes implicitly.
"""
import jax
import pytest


@pytest.fixture(autouse=True)
def strict_dtype_promotion(request):
    mode = "standard" if request.node.get_closest_marker("standard_promotion") else "strict"
    with jax.numpy_dtype_promotion(mode):
        yield
