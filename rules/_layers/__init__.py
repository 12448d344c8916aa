"""Volume-preserving layers built from the rules."""
