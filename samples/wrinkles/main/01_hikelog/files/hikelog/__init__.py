"""Helpers behind a hiking log."""
