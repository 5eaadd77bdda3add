"""Public trace formats read by more than one shell or harness (layer 0: imports nothing of kubesched)."""
