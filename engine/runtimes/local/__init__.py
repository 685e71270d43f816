"""runtime=local: a per-run host directory, every command in a bubblewrap sandbox."""
