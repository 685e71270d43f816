"""Capabilities: how agents reach a run's workspace (MCP tools now; SSH next)."""
