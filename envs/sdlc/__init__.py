"""The sdlc flavor: a mock GitHub (a bare remote and ``github_*`` tools), graded on the PR head."""
