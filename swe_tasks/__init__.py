"""SWE-bench Pro: dataset rows as tasks, the official assets read from a local checkout,
instance images over each instance's own image, and the official evaluator replayed."""
