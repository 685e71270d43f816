"""The coding environment: repo lifecycle (repo.py), the agent's tools (tools.py), the
grader (grader.py) and golden staging (validation.py). Needs only bash, coreutils and git
in the image."""

EXPLAINERS = {"CodingFlavor": "envs.coding.explain.CodingExplainer"}
"""The flavor's ``explain`` alone, light to import, for ``crucible show``
(``engine.config.plugins.explainer_class``)."""
