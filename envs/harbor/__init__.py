"""The ``harbor`` flavor: Harbor task folders (``task.toml``, ``instruction.md``,
``environment/``, ``tests/test.sh``, ``solution/solve.sh``) as crucible tasks, with no YAML per
task (docs/harbor.md)."""
