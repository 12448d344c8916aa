"""SympNets learning the flow maps of Hamiltonian systems (Jin et al., arXiv:2001.03750).

Modules: :mod:`.data` (the pendulum and the double pendulum, order-6 symplectic integrators, the
paper's data), :mod:`.models` (LA-SympNet and G-SympNet of :mod:`geometric.nn`, an MLP of the same
size), :mod:`.train` (one model, ``python -m examples.sympnet.train``), :mod:`.evaluate` (long
rollouts, energy errors, plots, summary) and :mod:`.demo` (all three models on both systems).
"""
