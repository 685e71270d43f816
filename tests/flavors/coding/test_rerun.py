"""The differential re-run's renaming and judging (envs/coding/rerun.py, judging.regrade), on git
repositories the tests build: no Docker. The runs themselves: test_differential_rerun.py."""

from __future__ import annotations

import asyncio
import dataclasses
import posixpath

from git_repos import commit, git

from engine.models import TestResult
from envs.coding import hidden, judging, rerun
from envs.coding.hidden import HiddenFile


def _repo(tmp_path, test_files: dict[str, bytes]) -> tuple:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(
        repo,
        {
            "src/m.py": b"x = 1\n",
            "tests/__init__.py": b"",
            "tests/test_cases.py": b"CASES = sorted(glob('cases/*.json'))\n",
        },
        "base",
    )
    test = commit(repo, test_files, "test")
    return repo, base, test


def test_only_files_nothing_names_are_renamed_and_fixed_names_never(tmp_path):
    repo, base, test = _repo(
        tmp_path,
        {
            "tests/cases/decimal.json": b"[]\n",  # found by a glob: free
            "tests/data/track.bin": b"\x00",  # opened by its name below: kept
            "tests/test_track.py": b"def test_t(): open('data/track.bin')\n",
            "tests/test_parse.py": b"def test_p(): pass\n",  # collected by pattern: free
            "tests/test_base.py": b"class Base: pass\n",  # imported by name below: kept
            "tests/test_more.py": b"from tests.test_base import Base\n",
            "tests/helpers.py": b"",  # a helper module: kept
            "tests/conftest.py": b"",  # found by its name: kept
            "tests/test_snap.py": b"def test_s(): pass\n",  # a file is named after it: kept
            "tests/__snapshots__/test_snap.ambr": b"snapshot\n",
        },
    )
    change = hidden.read_change(repo, base, test, [], task_id="t/x")
    free = rerun.renamable(repo, test, change)
    # test_track.py names its data, but nothing names test_track.py: it may move, its data not
    # test_snap.py and its snapshot name each other by their paths: both kept
    assert free == {"tests/cases/decimal.json", "tests/test_parse.py", "tests/test_more.py", "tests/test_track.py"}
    # a module the test command names itself keeps its name too (its placeholders name nothing)
    command = "python3 -m pytest tests/test_parse.py tests/test_more.py::test_m {test_files} -p no:cacheprovider"
    assert rerun.renamable(repo, test, change, command) == {"tests/cases/decimal.json", "tests/test_track.py"}


def test_a_renaming_moves_each_free_file_to_a_fresh_name_its_runner_still_collects():
    change = [
        HiddenFile("tests/cases/decimal.json", "644", b"[]"),
        HiddenFile("tests/test_parse.py", "644", b"t"),
        HiddenFile("gomod/clock/boundary_test.go", "644", b"g"),
        HiddenFile("tests/conftest.py", "644", b"c"),
    ]
    free = frozenset({"tests/cases/decimal.json", "tests/test_parse.py", "gomod/clock/boundary_test.go"})
    one, two = rerun.randomise(change, free), rerun.randomise(change, free)
    for renaming in (one, two):
        written = {f.path: f for f in renaming.hidden if f.mode != hidden.DELETE}
        deleted = {f.path for f in renaming.hidden if f.mode == hidden.DELETE}
        assert deleted == set(free)  # nothing left where the task has it
        assert "tests/conftest.py" in written
        names = {posixpath.basename(p) for p in written}
        assert any(n.startswith("test_0x") and n.endswith(".py") for n in names)  # sorts first: FIRST_IN_RERUN
        assert any(n.endswith("_test.go") and n != "boundary_test.go" for n in names)
        assert any(n.endswith(".json") and n != "decimal.json" for n in names)
        assert sorted(renaming.names.values()) == ["boundary_test", "decimal", "test_parse"]
        assert hidden.test_modules(list(renaming.hidden)) == [p for p in written if p.startswith("tests/test_0x")]
    assert one.names.keys().isdisjoint(two.names.keys())  # each re-run its own names


def test_a_reruns_hidden_modules_sort_before_the_visible_ones_and_a_first_gradings_after_most():
    """A runner collecting a directory in name order imports the re-run's hidden modules first
    (before any visible module imports the code under test), the first grading's after the
    task's lower-case names: the two gradings differ in what was imported first."""
    change = [HiddenFile("tests/test_parse.py", "644", b"t"), HiddenFile("tests/clock_test.py", "644", b"c")]
    free = frozenset(f.path for f in change)
    visible = {
        "test_": ["test_a.py", "test_duration.py", "test_Zed.py", "test_9.py", "test__x.py"],
        "_test": ["a_test.py", "zz_test.py", "Zed_test.py", "test_a.py", "B_test.py"],
    }
    for _ in range(20):
        again = [posixpath.basename(f.path) for f in rerun.randomise(change, free).hidden if f.mode != hidden.DELETE]
        first = rerun.first_grading(change, free, ())
        assert first is not None
        later = [posixpath.basename(f.path) for f in first.hidden if f.mode != hidden.DELETE]
        for name in again:  # before every visible module of its own pattern
            style = visible["test_" if name.startswith("test_") else "_test"]
            assert sorted([name, *style])[0] == name, (name, style)
        for name in later:
            assert sorted([name, "test_duration.py", "a_test.py"])[0] != name


def test_results_map_back_to_the_task_ids_and_the_order_always_changes():
    renaming = rerun.randomise(
        [HiddenFile("tests/cases/decimal.json", "644", b"[]"), HiddenFile("tests/test_parse.py", "644", b"t")],
        frozenset({"tests/cases/decimal.json", "tests/test_parse.py"}),
    )
    by_original = {v: k for k, v in renaming.names.items()}
    read = [
        {"name": f"tests/test_cases.py::test_cases[{by_original['decimal']}.json]", "status": "PASSED"},
        {"name": f"tests/{by_original['test_parse']}.py::test_p", "status": "FAILED"},
    ]
    assert rerun.map_back(read, renaming.names) == [
        {"name": "tests/test_cases.py::test_cases[decimal.json]", "status": "PASSED"},
        {"name": "tests/test_parse.py::test_p", "status": "FAILED"},
    ]
    modules = ["a/test_1.py", "a/test_2.py", "a/test_3.py"]
    for seed in range(50):
        assert sorted(rerun.shuffled(modules, seed)) == modules and rerun.shuffled(modules, seed) != modules
    assert rerun.shuffled(["a/test_1.py"], 3) == ["a/test_1.py"]


def _raw(reward_names: dict[str, str], renamed: dict | None = None) -> dict:
    raw = {
        "apply": {"ok": True},
        "test": {
            "exit_code": 0 if "FAILED" not in reward_names.values() else 1,
            "timed_out": False,
            "output_tail": "1 passed",
        },
        "results": {"format": "go", "tests": [{"name": n, "status": s} for n, s in reward_names.items()]},
    }
    if renamed is not None:
        raw["renamed"] = {"names": renamed, "seed": 1}
    return raw


def test_a_rerun_that_disagrees_scores_0_as_tampered_with_both_verdicts_kept():
    first = _raw({"t/test_cases.py::test_cases[decimal.json]": "PASSED"})
    agreeing = _raw({"t/test_cases.py::test_cases[xab12.json]": "PASSED"}, {"xab12": "decimal"})
    disagreeing = _raw({"t/test_cases.py::test_cases[xab12.json]": "FAILED"}, {"xab12": "decimal"})
    ok = judging.regrade({**first, "rerun": agreeing})
    assert ok.reward == 1.0 and ok.raw["reason"] == "tests passed" and "rerun_differences" not in ok.raw
    assert ok.tests == [TestResult("t/test_cases.py::test_cases[decimal.json]", "PASSED")]
    bad = judging.regrade({**first, "rerun": disagreeing})
    assert bad.reward == 0.0 and bad.raw["reason"] == rerun.TAMPERED
    assert bad.raw["rerun_differences"] == [
        "reward 1 vs 0",
        "t/test_cases.py::test_cases[decimal.json] PASSED vs FAILED",
    ]
    assert bad.raw["rerun"]["reason"] == "tests failed"  # the re-run's own verdict, kept
    assert judging.regrade(bad.raw).raw == bad.raw  # a pure function of the stored raw grade
    alone = judging.regrade(first)
    assert alone.reward == 1.0 and "rerun" not in alone.raw


def test_check_explains_a_disagreeing_rerun_with_the_names_it_used():
    from envs.coding.flavor import CodingFlavor

    first = _raw({"t/test_cases.py::test_cases[decimal.json]": "PASSED"})
    bad = judging.regrade(
        {**first, "rerun": _raw({"t/test_cases.py::test_cases[xab12.json]": "FAILED"}, {"xab12": "decimal"})}
    )
    lines = CodingFlavor().explain(bad.raw)
    assert (
        "differential re-run (hidden files renamed: decimal) disagrees: reward 1 vs 0; "
        "t/test_cases.py::test_cases[decimal.json] PASSED vs FAILED"
    ) in lines, lines


def test_with_lists_only_the_listed_tests_must_agree_a_flaky_unlisted_one_may_differ():
    """A locked task leaves its flaky tests out of its lists (engine/plan/lock.py): their
    status moves no verdict, so the re-run is not judged on them; a listed test still is."""
    first = [TestResult("t/test_a.py::test_fix", "PASSED"), TestResult("t/test_a.py::test_coin", "PASSED")]
    coin_flipped = [TestResult("t/test_a.py::test_fix", "PASSED"), TestResult("t/test_a.py::test_coin", "FAILED")]
    fix_flipped = [TestResult("t/test_a.py::test_fix", "FAILED"), TestResult("t/test_a.py::test_coin", "PASSED")]
    listed = {"t/test_a.py::test_fix"}
    assert rerun.differences(1.0, first, 1.0, coin_flipped, judged=listed) == []
    assert rerun.differences(1.0, first, 0.0, fix_flipped, judged=listed) == [
        "reward 1 vs 0",
        "t/test_a.py::test_fix PASSED vs FAILED",
    ]
    # Without lists every test counts (any failure fails the verdict itself).
    assert rerun.differences(1.0, first, 1.0, coin_flipped) == ["t/test_a.py::test_coin PASSED vs FAILED"]


def test_a_first_grading_renames_what_the_rerun_would_and_runs_the_modules_in_the_task_order():
    change = [HiddenFile(f"tests/test_{n}.py", "644", b"def test_p(): pass\n") for n in "abc"]
    change.append(HiddenFile("tests/cases/decimal.json", "644", b"[]"))
    free = frozenset(f.path for f in change)
    for _ in range(20):  # the random names sort any way: the task's order each time all the same
        first = rerun.first_grading(change, free, ())
        assert first is not None and first.seed is None and not first.second
        modules = first.ordered(hidden.test_modules(list(first.hidden)))
        assert [first.task_path(m) for m in modules] == ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]
        assert not {f.path for f in first.hidden if f.mode != hidden.DELETE} & free
        assert first.record()["seed"] is None and sorted(first.record()["names"].values()) == [
            "decimal",
            "test_a",
            "test_b",
            "test_c",
        ]
    assert rerun.first_grading(change, frozenset(), ()) is None  # nothing free: the task's own names


def _pytest_task(tmp_path):
    import coding_task as ct

    repo, base, test = _repo(
        tmp_path, {"tests/cases/decimal.json": b"[]\n", "tests/test_parse.py": b"def test_p(): pass\n"}
    )
    return ct.task(
        ct.TaskRepo(repo, base, test, base),
        hidden_tests=[],
        test_command="python3 -m pytest -q {test_files}",
        tests_ran_regex=None,
    )


def test_the_first_grading_renames_hidden_files_under_randomise_test_names_and_only_where_the_rerun_defends(tmp_path):
    import coding_task as ct

    from envs.coding.flavor import CodingFlavor, rerun_defends

    task = _pytest_task(tmp_path)

    def first(mode: str, *overrides: str):
        return asyncio.run(CodingFlavor()._first_change(ct.spec(task, mode, *overrides)))

    change, renaming = first("strict")
    assert renaming is not None and sorted(renaming.names.values()) == ["decimal", "test_parse"]
    assert {f.path for f in change if f.mode == hidden.DELETE} == {"tests/cases/decimal.json", "tests/test_parse.py"}
    assert list(renaming.functions.values()) == ["test_p"]
    _, again = first("strict")
    assert again is not None and again.names.keys().isdisjoint(renaming.names.keys())  # fresh names per run
    # the flag off: the first grading as the task has it, the re-run alone renaming (with or without it)
    for mode, overrides in (("strict", ["integrity.defences.randomise_test_names=false"]), ("none", []), ("vault", [])):
        change, renaming = first(mode, *overrides)
        assert renaming is None and [f.path for f in change] == ["tests/cases/decimal.json", "tests/test_parse.py"]
    # where the verdict is isolated behind the uid wall nothing is renamed (rerun_defends)
    isolated = ct.spec(dataclasses.replace(task, isolated_verdict=True), "strict")
    assert not rerun_defends(isolated)
    assert asyncio.run(CodingFlavor()._first_change(isolated))[1] is None
