"""The `crucible` command, one module per subcommand; `main` dispatches."""
