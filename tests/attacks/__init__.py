"""The integrity attack suite: cheats an agent could try, each run as a real crucible run.

``catalog`` lists the attacks (tool calls an agent would make), ``harness`` runs them as
``integration_test`` runs of a sample task whose ``validation`` is the attack, and
``table`` prints the attack x integrity-mode table that tests/attacks/README.md shows.
"""
