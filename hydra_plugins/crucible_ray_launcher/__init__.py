"""crucible's Ray launcher, a Hydra plugin (Hydra finds launchers only under ``hydra_plugins``)."""
