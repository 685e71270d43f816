"""Composing configs: the Hydra tree (`compose`) and the core dataclass schemas (`schema`)."""
