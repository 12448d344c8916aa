"""riemannian_gradient on parameter pytrees."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric

ST = geometric.Stiefel(6, 2, metric="canonical")
SPHERE = geometric.Sphere(4)


def params_and_grads():
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    params = {"heads": jax.vmap(lambda k: ST.random_point(k, jnp.float64))(jax.random.split(keys[0], 3)),
              "x": SPHERE.random_point(keys[1], jnp.float64),
              "mlp": {"w": jax.random.normal(keys[2], (3, 3)), "b": jnp.zeros(3)}}
    grads = jax.tree.map(lambda p, k: jax.random.normal(k, p.shape, p.dtype), params,
                         {"heads": keys[3], "x": keys[4], "mlp": {"w": keys[5], "b": keys[5]}})
    return params, grads


def test_manifold_leaves_get_the_riesz_map_and_others_pass_through():
    params, grads = params_and_grads()
    # None for a whole subtree: `manifolds` may be a prefix of `params`.
    r = geometric.riemannian_gradient(params, grads, {"heads": ST, "x": SPHERE, "mlp": None})
    np.testing.assert_allclose(r["heads"], ST.egrad_to_rgrad(params["heads"], grads["heads"]))
    np.testing.assert_allclose(r["x"], SPHERE.egrad_to_rgrad(params["x"], grads["x"]))
    assert r["mlp"]["w"] is grads["mlp"]["w"] and r["mlp"]["b"] is grads["mlp"]["b"]


def test_is_the_derivative_along_curves():
    """d/dt f(R_x(tξ)) at t = 0 equals inner(x, grad f, ξ), for every manifold leaf."""
    params, _ = params_and_grads()
    manifolds = {"heads": ST, "x": SPHERE, "mlp": {"w": None, "b": None}}
    a = jax.random.normal(jax.random.PRNGKey(7), (6, 6), jnp.float64)

    def f(p):
        return (jnp.sum(jnp.sin(jnp.einsum("hip,ij,hjp->", p["heads"], a, p["heads"])))
                + jnp.sum(p["x"] ** 3) + jnp.sum(p["mlp"]["w"] ** 2))

    rgrad = geometric.riemannian_gradient(params, jax.grad(f)(params), manifolds)
    xi = {"heads": ST.random_tangent(jax.random.PRNGKey(8), params["heads"]),
          "x": SPHERE.random_tangent(jax.random.PRNGKey(9), params["x"])}
    for name, m in [("heads", ST), ("x", SPHERE)]:
        def along(t, name=name, m=m):
            return f(params | {name: m.retract(params[name], t * xi[name])})
        _, derivative = jax.jvp(along, (0.0,), (1.0,))
        np.testing.assert_allclose(derivative, jnp.sum(m.inner(params[name], rgrad[name], xi[name])),
                                   rtol=1e-12)


def test_bad_trees():
    params, grads = params_and_grads()
    rgrad = geometric.riemannian_gradient
    with pytest.raises(ValueError, match=r"`manifolds` must have the structure of `params`"):
        rgrad(params, grads, {"heads": ST, "mlp": None})
    with pytest.raises(ValueError, match=r"`grads` must have the structure of `params`"):
        rgrad(params, {"heads": grads["heads"]}, {"heads": ST, "x": None, "mlp": None})
    with pytest.raises(TypeError, match=r"the leaves of `manifolds` must be manifolds .* got str"):
        rgrad(params, grads, {"heads": "stiefel", "x": None, "mlp": None})
    with pytest.raises(ValueError, match=r"egrad_to_rgrad: `x` must have shape \(\.\.\., 4\); got \(3, 6, 2\)"):
        rgrad(params, grads, {"heads": SPHERE, "x": None, "mlp": None})
