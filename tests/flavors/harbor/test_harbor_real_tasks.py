"""What real Terminal-Bench 2 tasks need of the flavor (bench/bench_harbor.py runs one): a
``FROM python:*`` mapped onto crucible's Debian base gets python and pip back, and a test.sh
that downloads its test runner at grading, which has no network, is named with the fix."""

from __future__ import annotations

import base64
from pathlib import Path

import harbor_tasks

from envs.harbor import folder, image
from envs.harbor.flavor import HarborFlavor

SHIMMED = "FROM python:3.12-slim@sha256:{digest}\nRUN pip install --no-cache-dir pytest==8.4.1\nWORKDIR /app\n"


def test_a_mapped_python_image_gets_python_pip_and_the_builds_ca_bundle_before_its_own_steps(tmp_path: Path):
    harbor_tasks._sh(tmp_path, "t")
    (tmp_path / "t" / "environment" / "Dockerfile").write_text(SHIMMED.format(digest="0" * 64))
    text = image._dockerfile_text(folder.read(tmp_path / "t"), True, tail=False)
    lines = text.splitlines()
    start = lines.index(f"FROM ${{{image.BASE_ARG}}}")
    assert "python3-pip" in lines[start + 1] and lines[start + 2].startswith("COPY crucible-ca.pem ")
    assert lines.index("ARG PIP_CERT=/etc/crucible/ca.pem") < lines.index(
        "RUN pip install --no-cache-dir pytest==8.4.1"
    )
    # other images are mapped bare, and the tail is crucible's own
    (tmp_path / "t" / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    assert "python3-pip" not in image._dockerfile_text(folder.read(tmp_path / "t"), True)


def test_a_test_sh_that_downloads_at_grading_is_named_with_the_fix():
    out = "curl: (6) Could not resolve host: astral.sh\n/tests/test.sh: line 15: uvx: command not found\n"
    raw = {"output": base64.b64encode(out.encode()).decode()}
    fix = HarborFlavor().remedy(None, raw)  # type: ignore[arg-type]
    assert fix is not None and "crucible grades without a network" in fix
    assert HarborFlavor().remedy(None, {"output": base64.b64encode(b"1 failed").decode()}) is None  # type: ignore[arg-type]
