"""The linear symplectic transformer on the double pendulum, against volume-preserving and plain transformers.

Modules: :mod:`.data` (double-pendulum trajectories from many initial states, windows by
:func:`geometric.nn.trajectory_windows`), :mod:`.models` (:class:`geometric.nn.LinearSymplecticTransformer`,
the volume-preserving transformer and a standard transformer of :mod:`examples.rigid_body.models`
in dimension 4), :mod:`.train` (one model, ``python -m examples.symplectic_transformer.train``),
:mod:`.evaluate` (rollouts, energy, plots, summary) and :mod:`.demo` (all three).
"""
