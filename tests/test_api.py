"""The public API is fully annotated: every parameter and every return of every public function,
method and property in ``__all__`` of the public modules (``py.typed`` ships with both packages)."""
import importlib
import importlib.metadata
import importlib.resources
import inspect

import pytest

MODULES = ["rules", "rules.testing", "rules.internal", "geometric", "geometric.optim",
           "geometric.solvers", "geometric.hyperbolic", "geometric.nn"]


def _callables(module):
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue
        if not inspect.isclass(obj):
            if callable(obj):
                yield name, obj
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_") and attr not in ("__init__", "__call__"):
                continue
            if isinstance(value, (classmethod, staticmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                yield f"{name}.{attr}", value


@pytest.mark.parametrize("module_name", MODULES)
def test_public_api_is_annotated(module_name):
    missing = []
    for name, fn in _callables(importlib.import_module(module_name)):
        signature = inspect.signature(fn)
        params = [p for p, v in signature.parameters.items()
                  if v.annotation is inspect.Parameter.empty and p not in ("self", "cls")]
        if params or signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{name}: parameters {params}"
                           + (", return" if signature.return_annotation is inspect.Signature.empty
                              else ""))
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("package", ["rules", "geometric"])
def test_ships_py_typed_and_version(package):
    module = importlib.import_module(package)
    assert (importlib.resources.files(package) / "py.typed").is_file()
    assert module.__version__ == importlib.metadata.version("pullbacks")


# The rules that stand in for JAX's functions, and those functions.
DROP_INS = {
    "inv": "jax.numpy.linalg.inv", "solve": "jax.numpy.linalg.solve",
    "det": "jax.numpy.linalg.det", "slogdet": "jax.numpy.linalg.slogdet",
    "cholesky": "jax.numpy.linalg.cholesky", "qr": "jax.numpy.linalg.qr",
    "eigh": "jax.numpy.linalg.eigh", "svd": "jax.numpy.linalg.svd",
    "expm": "jax.scipy.linalg.expm", "cho_solve": "jax.scipy.linalg.cho_solve",
    "expm_frechet": "jax.scipy.linalg.expm_frechet",
    "polar": "jax.scipy.linalg.polar",
    "sqrtm": "jax.scipy.linalg.sqrtm",
    "solve_sylvester": "jax.scipy.linalg.solve_sylvester",
    "solve_continuous_lyapunov": "scipy.linalg.solve_continuous_lyapunov",
    "eig": "jax.numpy.linalg.eig", "eigvals": "jax.numpy.linalg.eigvals",
}


def _jax_function(path):
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", DROP_INS)
def test_signature_is_jaxs(name):
    """Every parameter of JAX's function, in order, with its kind, name and default; a rule may
    add keyword-only parameters of its own after them."""
    import rules

    ours = list(inspect.signature(getattr(rules, name)).parameters.values())
    theirs = list(inspect.signature(_jax_function(DROP_INS[name])).parameters.values())
    assert [(p.name, p.kind, p.default) for p in ours[:len(theirs)]] == \
        [(p.name, p.kind, p.default) for p in theirs]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in ours[len(theirs):])
