"""A toy flavor that lives entirely in tests/: proof that a flavor plugs in without engine/ edits.

A toy task asks a question; the agent answers through the flavor's own ``answer`` tool;
grading, in a fresh workspace, compares the answer with the one the task keeps host-side.
No repo, no refs, no diff: nothing of the coding flavor.
"""
