"""An image build's steps on a terminal (engine/build/progress.py)."""

from __future__ import annotations

import io
import re

from engine.build.progress import BuildProgress


def test_a_builds_steps_are_shown_as_text_on_a_terminal_and_nothing_elsewhere(tmp_path):
    shown, quiet = io.StringIO(), io.StringIO()
    for out, interactive in ((shown, True), (quiet, False)):
        build = BuildProgress("crucible/task:0123456789abcdef", tmp_path / "b.log", stream=out, interactive=interactive)
        build.output("Step 2/3 : COPY [/src, /dst] [bold]x\n")  # Docker's text, never markup
        build.output(" ---> Running in 1234\n")
        build.done(None)
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in shown.getvalue().splitlines()]
    assert lines[0] == f"building crucible/task:0123456789abcdef  (full log: {tmp_path / 'b.log'})"
    assert lines[1:] == ["  0123456789ab  Step 2/3 : COPY [/src, /dst] [bold]x", "  0123456789ab  built"]
    assert quiet.getvalue() == ""
