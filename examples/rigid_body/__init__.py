"""The volume-preserving transformer on rigid-body dynamics (Brantner et al., arXiv:2312.11166).

Modules: :mod:`.data` (Euler's equations, implicit midpoint, windows, cache), :mod:`.models` (the
volume-preserving transformer, the volume-preserving feed-forward network and a standard
transformer, built on :mod:`rules`), :mod:`.train` (one model, ``python -m
examples.rigid_body.train``), :mod:`.evaluate` (rollouts, plots, summary) and :mod:`.demo` (all
three on a small budget).
"""
