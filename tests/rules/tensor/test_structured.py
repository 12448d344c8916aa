"""Tests of rules/_structured.py: packed structured matrices and their gradient convention."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_frule, check_rrule

CLASSES = [rules.StrictlyLower, rules.StrictlyUpper, rules.SkewSymmetric, rules.Symmetric]
IDS = [c.__name__ for c in CLASSES]


def _rand(shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape))


def _reference_dense(cls, p, n):
    """The dense matrix written out entry by entry (row-major lower-triangle packing), in NumPy."""
    p, w, k = np.asarray(p), np.zeros((n, n)), 0
    for i in range(n):
        for j in range(i + 1 if cls is rules.Symmetric else i):
            if cls is rules.StrictlyUpper:
                w[j, i] = p[k]
            else:
                w[i, j] = p[k]
                if cls is rules.SkewSymmetric:
                    w[j, i] = -p[k]
                elif cls is rules.Symmetric:
                    w[j, i] = p[k]
            k += 1
    return jnp.asarray(w)


def _exact_packed_gradient(cls, w_bar):
    """The exact derivative (docs/derivations/structured.md#exact-derivative), read off the dense cotangent."""
    w_bar, n, out = np.asarray(w_bar), w_bar.shape[-1], []
    for i in range(n):
        for j in range(i + 1 if cls is rules.Symmetric else i):
            if cls is rules.StrictlyLower:
                out.append(w_bar[i, j])
            elif cls is rules.StrictlyUpper:
                out.append(w_bar[j, i])
            elif cls is rules.SkewSymmetric:
                out.append(w_bar[i, j] - w_bar[j, i])
            else:
                out.append(w_bar[i, j] + (w_bar[j, i] if i != j else 0.0))
    return np.array(out)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@pytest.mark.parametrize("n", [1, 2, 4])
def test_dense_and_round_trip(cls, n):
    p = _rand((cls.packed_size(n),), n)
    w = cls(p, n)
    np.testing.assert_array_equal(w.dense(), _reference_dense(cls, p, n))
    assert w.shape == (n, n) and w.dtype == p.dtype
    np.testing.assert_array_equal(cls.from_dense(w.dense()).packed, p)
    batch = cls(jnp.stack([p, 2 * p]), n)  # leading batch axes of the packed vector
    np.testing.assert_array_equal(batch.dense()[1], 2 * w.dense())
    np.testing.assert_array_equal(cls.from_dense(batch.dense()).packed, batch.packed)


def test_sizes_and_no_negative_zeros():
    assert [c.packed_size(4) for c in CLASSES] == [6, 6, 6, 10]
    w = rules.SkewSymmetric(-jnp.ones(3), 3).dense()
    assert not bool(jnp.any(jnp.signbit(jnp.diagonal(w))))


def test_from_dense_reads_stored_entries_only():
    w = _rand((3, 3), 1)
    np.testing.assert_array_equal(rules.StrictlyLower.from_dense(w).packed, w[[1, 2, 2], [0, 0, 1]])
    np.testing.assert_array_equal(rules.StrictlyUpper.from_dense(w).packed, w[[0, 0, 1], [1, 2, 2]])
    np.testing.assert_array_equal(rules.SkewSymmetric.from_dense(w).packed, w[[1, 2, 2], [0, 0, 1]])
    np.testing.assert_array_equal(rules.Symmetric.from_dense(w).packed,
                                  w[[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]])


def test_pytree_jit_and_vmap():
    w = rules.SkewSymmetric(_rand((6,)), 4)
    leaves, treedef = jax.tree_util.tree_flatten(w)
    assert len(leaves) == 1 and leaves[0] is w.packed
    assert jax.tree_util.tree_unflatten(treedef, leaves).n == 4
    np.testing.assert_array_equal(jax.jit(lambda w: w.dense())(w), w.dense())
    stacked = rules.SkewSymmetric(_rand((3, 6), 1), 4)
    np.testing.assert_array_equal(jax.vmap(lambda w: w.dense())(stacked), stacked.dense())


def test_unit_cotangents():
    # A single dense entry seen through each class: the packed gradient is 1 (or -1), never ½.
    grad = jax.grad(lambda w, i, j: w.dense()[i, j])
    s = rules.SkewSymmetric(_rand((3,)), 3)
    np.testing.assert_array_equal(grad(s, 1, 0).packed, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(grad(s, 0, 1).packed, [-1.0, 0.0, 0.0])
    m = rules.Symmetric(_rand((6,)), 3)
    np.testing.assert_array_equal(grad(m, 0, 1).packed, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(grad(m, 1, 1).packed, [0.0, 0.0, 1.0, 0.0, 0.0, 0.0])


def _paths(cls, n):
    """Ways to use a packed matrix W, each with an equivalent plain-jnp function of dense W."""
    a3, a2 = _rand((2, n, 3), 10), _rand((n, 3), 11)
    b3 = _rand((2, 3, n), 12)
    paths = {
        "dense": (lambda w: jnp.sin(w.dense()), lambda d: jnp.sin(d)),
        "mat_tensor_mul, tensor": (lambda w: rules.mat_tensor_mul(w, a3), lambda d: d @ a3),
        "mat_tensor_mul, matrix": (lambda w: rules.mat_tensor_mul(w, a2), lambda d: d @ a2),
        "tensor_mat_mul, tensor": (lambda w: rules.tensor_mat_mul(b3, w), lambda d: b3 @ d),
        "tensor_mat_mul, matrix": (lambda w: rules.tensor_mat_mul(b3[0], w), lambda d: b3[0] @ d),
        "tensor_transpose_mat_mul": (lambda w: rules.tensor_transpose_mat_mul(a3, w),
                                     lambda d: a3.mT @ d),
    }
    if cls in (rules.StrictlyLower, rules.StrictlyUpper):
        x3, x1 = _rand((2, 3, n), 13), _rand((n,), 14)
        ff = rules.volume_preserving_feedforward
        paths["feedforward, tensor"] = (lambda w: ff(x3, w), lambda d: x3 + jnp.tanh(x3 @ d.T))
        paths["feedforward, vector"] = (lambda w: ff(x1, w), lambda d: x1 + jnp.tanh(d @ x1))
    if cls is rules.SkewSymmetric:
        x = _rand((2, 4, n), 15)
        paths["attention"] = (lambda w: rules.volume_preserving_attention(x, w),
                              lambda d: rules.volume_preserving_attention(x, d))
    return paths


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_packed_gradient_convention_on_every_path(cls):
    n = 3
    p = _rand((cls.packed_size(n),), 5)
    dense = _reference_dense(cls, p, n)
    paths = _paths(cls, n)
    y_bars = {name: _rand(jax.eval_shape(f_dense, dense).shape, 6) for name, (_, f_dense) in
              paths.items()}

    @jax.jit
    def gradients(p, dense):
        # Per path: the packed gradient through the library, and the dense cotangent from plain
        # jnp autodiff (packed below by the formula of docs/derivations/structured.md#exact-derivative).
        return {name: (jax.grad(lambda p: jnp.sum(f(cls(p, n)) * y_bars[name]))(p),
                       jax.grad(lambda d: jnp.sum(f_dense(d) * y_bars[name]))(dense))
                for name, (f, f_dense) in paths.items()}

    for name, (got, w_bar) in gradients(p, dense).items():
        np.testing.assert_allclose(got, _exact_packed_gradient(cls, w_bar), rtol=1e-12,
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_check_rrule_and_frule(cls):
    w = cls(_rand((cls.packed_size(4),), 7), 4)
    check_rrule(lambda w: w.dense(), w, max_entries=12)
    check_frule(cls.dense, w)


def test_bad_input():
    with pytest.raises(ValueError, match=r"StrictlyLower: `packed` must have shape \(\.\.\., 3\) "
                                         r"for n = 3; got \(4,\)"):
        rules.StrictlyLower(jnp.zeros(4), 3)
    with pytest.raises(ValueError, match=r"Symmetric: `packed` must have shape \(\.\.\., 6\)"):
        rules.Symmetric(jnp.zeros(3), 3)
    with pytest.raises(TypeError, match="SkewSymmetric: `n` must be a non-negative int; got 3.0"):
        rules.SkewSymmetric(jnp.zeros(3), 3.0)
    with pytest.raises(TypeError, match="StrictlyUpper: `packed` must have dtype .* got int32"):
        rules.StrictlyUpper(jnp.zeros(3, jnp.int32), 3)
    with pytest.raises(TypeError, match="StrictlyUpper: `packed` must be a JAX or NumPy array"):
        rules.StrictlyUpper([0.0, 0.0, 0.0], 3)
    with pytest.raises(ValueError, match=r"SkewSymmetric.from_dense: `w` must have shape "
                                         r"\(\.\.\., n, n\); got \(2, 3\)"):
        rules.SkewSymmetric.from_dense(jnp.zeros((2, 3)))
