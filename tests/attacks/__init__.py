"""The integrity attack suite: cheats an agent could try, each run as a real crucible run.

``catalog``, ``ordinary`` and ``runtime`` list the attacks (tool calls an agent would make, each
an ``attack.Attack``), ``harness`` runs them as ``integration_test`` runs of a sample task whose
``validation`` is the attack, ``docs`` renders tests/attacks/README.md's tables from the entries,
and ``table`` prints the same attack x integrity-mode tables from real runs.
"""
