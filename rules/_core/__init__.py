"""The machinery every rule is built with: :class:`~rules._core.rule.Rule` and the helpers."""
