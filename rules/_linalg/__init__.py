"""Dense linear algebra rules, one module per family."""
