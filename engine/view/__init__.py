"""``crucible view``: a local, read-only web viewer over the store, and its static bundle."""
