"""Environments, run by the engine beside the workspace (host-side Python acting through ``Workspace``)."""
