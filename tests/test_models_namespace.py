"""``engine.models`` is one namespace over two modules (issue 38): the store's records, loaded
with it, and the run pipeline's classes, loaded on the first read of one of their names, so
the commands that only read the store never create them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import engine.models

ROOT = Path(__file__).resolve().parents[1]


def test_every_name_of_the_namespace_is_there_and_from_its_module():
    for name in engine.models.__all__:
        value = getattr(engine.models, name)
        if isinstance(value, type):
            assert value.__module__ in ("engine.models.records", "engine.models.pipeline"), name


def test_a_name_it_does_not_have_is_an_import_error():
    with pytest.raises(ImportError):
        from engine.models import NoSuchModel  # type: ignore[attr-defined]  # noqa: F401


def test_the_store_and_the_read_commands_never_load_the_pipeline_classes():
    script = (
        "import sys\n"
        "import engine.cli.reading, engine.cli.show, engine.report.compute, engine.report.render\n"
        "import engine.run.session, engine.store.duckdb\n"
        "print('engine.models.pipeline' in sys.modules)\n"
        "from engine.models import RunSpec\n"
        "print('engine.models.pipeline' in sys.modules, RunSpec.__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "RunSpec"]
