"""One module per manifold, each a final frozen dataclass implementing the hooks of
:class:`geometric.AbstractManifold` (see its docstring for the list)."""
