"""The stager sends the scan's files back at its end (envs/coding/sh/stager.sh, read by
``staging.scanned``); anything not read cleanly is left to be read from the workspace.
The stager's side runs in every Docker grading (tests/flavors/coding/test_attacks_ordinary.py's
scan findings come from these files)."""

from __future__ import annotations

from envs.coding.staging import scanned, submission_input

NONCE = "n0nce"


def record(path: str, data: bytes) -> bytes:
    raw = path.encode()
    return f"\n{NONCE} scan {len(data)} {len(raw)}\n".encode() + raw + data


def test_each_file_comes_back_by_its_path_bytes_and_all():
    files = {"pkg/a.py": b"import os\n\nx = 1\n", "pkg/b.py": b"", "pkg/é.py": b"\0bin\n"}
    output = b"applied\n" + b"".join(record(p, d) for p, d in files.items())
    assert scanned(output, len(output), NONCE) == files


def test_a_file_that_holds_a_record_marker_is_read_whole_by_its_size():
    tricky = f"\n{NONCE} scan 3 1\nx\n".encode() * 2
    output = record("a.py", tricky) + record("b.py", b"ok")
    assert scanned(output, len(output), NONCE) == {"a.py": tricky, "b.py": b"ok"}


def test_output_cut_in_the_middle_gives_nothing():
    output = record("a.py", b"x" * 100)
    assert scanned(output, len(output) + 1, NONCE) == {}


def test_a_short_last_record_or_a_malformed_one_ends_what_is_read():
    whole = record("a.py", b"one")
    assert scanned(whole + record("b.py", b"two")[:-1], len(whole) + len(record("b.py", b"two")) - 1, NONCE) == {
        "a.py": b"one"
    }
    bad = whole + f"\n{NONCE} scan x 1\nb".encode()
    assert scanned(bad, len(bad), NONCE) == {"a.py": b"one"}


def test_the_header_says_how_long_the_scan_list_is_and_it_comes_last():
    stdin = submission_input([("exact", b"PATCH")], [b"HID"], ["pkg", "pkg/a.py"], ["pkg/a.py", "pkg/b.py"])
    header, body = stdin.split(b"\n", 1)
    assert header.split() == [
        b"1",
        b"list",
        str(len(b"pkg\0pkg/a.py\0")).encode(),
        str(len(b"pkg/a.py\0pkg/b.py\0")).encode(),
        b"exact",
        b"5",
        b"3",
    ]
    assert body == b"PATCH" + b"HID" + b"pkg\0pkg/a.py\0" + b"pkg/a.py\0pkg/b.py\0"


def test_the_scan_of_the_same_diff_and_files_is_kept_and_anything_else_is_scanned(tmp_path, monkeypatch):
    """The test-awareness scan is a pure function of the diff, the files it reads and the test
    paths: a second grading of the same (a golden run's, a rerun's) reads its findings kept on
    disk; a file that differs by one byte, or other test paths, is scanned afresh."""
    from envs.coding import grader
    from envs.integrity.scan import scanner

    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path))
    code = b"import os\nFILES = os.listdir('tests')\n"
    diff = (
        b"diff --git a/pkg/a.py b/pkg/a.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/a.py\n"
        b"@@ -0,0 +1,2 @@\n+import os\n+FILES = os.listdir('tests')\n"
    )
    scans: list[dict] = []
    real = scanner.scan
    monkeypatch.setattr(scanner, "scan", lambda *args: scans.append(args[1]) or real(*args))
    first = grader._scanned(diff, {"pkg/a.py": code}, ["tests/*"])
    assert {f["rule"] for f in first} == {"test-path", "tree-walk"} and len(scans) == 1
    assert grader._scanned(diff, {"pkg/a.py": code}, ["tests/*"]) == first and len(scans) == 1
    grader._scanned(diff, {"pkg/a.py": code + b"\n"}, ["tests/*"])
    grader._scanned(diff, {"pkg/a.py": code}, ["spec/*"])
    grader._scanned(diff, {"pkg/a.py": None}, ["tests/*"])
    assert len(scans) == 4


def test_a_scan_that_could_not_read_a_file_is_never_kept(tmp_path, monkeypatch):
    """An unscannable finding may be the parser's RecursionError or MemoryError of the moment,
    not the file's: such findings are answered, never kept, and the next grading scans again."""
    from envs.coding import grader
    from envs.integrity.scan import scanner

    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path))
    code = b"x = " + b"-" * 7000 + b"1\n"  # deeper than CPython's parser goes
    diff = (
        b"diff --git a/pkg/a.py b/pkg/a.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/a.py\n@@ -0,0 +1 @@\n+"
        + code
    )
    scans: list[dict] = []
    real = scanner.scan
    monkeypatch.setattr(scanner, "scan", lambda *args: scans.append(args[1]) or real(*args))
    for _ in range(2):
        assert [f["rule"] for f in grader._scanned(diff, {"pkg/a.py": code}, ["tests/*"])] == ["unscannable"]
    assert len(scans) == 2
