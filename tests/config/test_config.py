"""Composing configs: schemas catch bad keys and types, nested task sets glob, errors are one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config.compose import combinations, compose_config, expand_globs, to_typed
from engine.config.tree import group_options
from engine.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_CONF = ROOT / "tests" / "conf"


@pytest.fixture
def extra_conf(tmp_path, monkeypatch):
    """A throw-away config dir on the search path, for tasks with deliberate mistakes."""
    (tmp_path / "task" / "broken").mkdir(parents=True)
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", f"{FIXTURE_CONF}:{tmp_path}")
    return tmp_path


def write_task(conf: Path, name: str, body: str) -> None:
    (conf / "task" / "broken" / f"{name}.yaml").write_text(body)


GOOD_TASK = (
    "name: {name}\nset: broken\nrepo: generated://sample\nhidden_tests: [t.py]\n"
    "test_command: 'python3 -m pytest {{test_files}}'\nprompt: p\n"
)


def test_nested_task_sets_glob_where_stock_hydra_finds_nothing():
    tasks = group_options("task")
    sample = [t for t in tasks if t.startswith("sample/")]
    assert len(sample) == 4, tasks
    assert expand_globs(["task=glob(sample/*)"]) == ["task=" + ",".join(sample)]
    assert expand_globs(["task=glob(sample/*,exclude=[" + sample[0] + "])"]) == ["task=" + ",".join(sample[1:])]


def test_a_selection_matching_nothing_is_an_error():
    with pytest.raises(ConfigError, match="selects nothing"):
        expand_globs(["task=glob(nosuchset/*)"])


def test_combinations_cross_every_sweep_axis():
    combos = combinations(["task=glob(sample/*)", "agent=noop,integration_test", "attempt=range(0,3)"])
    assert len(combos) == 4 * 2 * 3
    assert len({tuple(c) for c in combos}) == 24


def test_a_sweep_with_a_new_seed_expands_and_crosses_its_axes_without_hydras_parser(monkeypatch):
    """Globs and sweep axes are a function of the sweep overrides alone: the bench's (and a
    user's) sweep with a new seed is answered from the evaluation cache, each override in its
    place, with no import or run of Hydra's override parser (~0.2 s)."""
    from engine.config import compose

    sweep = ["task=glob(sample/*)", "agent=noop,integration_test", "hydra.launcher.n_jobs=2"]
    first = combinations([sweep[0], "seed=31", *sweep[1:]])

    def no_parser(overrides):
        raise AssertionError(f"Hydra parsed {overrides}")

    monkeypatch.setattr(compose, "_parse", no_parser)
    again = combinations([sweep[0], "seed=32", *sweep[1:]])
    assert again == [[task, "seed=32", agent, jobs] for task, _, agent, jobs in first]
    assert len(again) == 4 * 2 and {c[1] for c in again} == {"seed=32"}
    samples = [o for o in group_options("task") if o.startswith("sample/")]
    assert expand_globs(["seed=33", sweep[0]]) == ["seed=33", "task=" + ",".join(samples)]
    # What could be a sweep is still parsed (and here refused by the stand-in parser).
    with pytest.raises(AssertionError, match="Hydra parsed"):
        combinations(["seed=1,2"])


def test_composed_config_is_typed_and_refs_follow_the_three_branch_convention():
    task = group_options("task")[0]
    cfg = to_typed(compose_config([f"task={task}"]))
    name = task.split("/")[-1]
    assert cfg.task.refs.baseline == f"{name}_baseline"
    assert cfg.task.refs.golden == f"{name}_golden"
    assert cfg.integrity.mode == "strict" and cfg.integrity.uid_wall and not cfg.integrity.agent_network


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["agnt=noop"], "unknown config key 'agnt'"),
        (["task.nme=x"], "unknown config key 'task.nme'"),
        (["agent=nope"], "unknown agent 'nope'"),
        (["seed=abc"], "bad value in override 'seed=abc'"),
        (["integrity=lax"], "unknown integrity 'lax'"),
    ],
)
def test_bad_overrides_fail_at_compose_time_naming_the_key(overrides, message):
    task = group_options("task")[0]
    with pytest.raises(ConfigError, match=message):
        compose_config([f"task={task}", *overrides])


def test_a_misspelled_key_in_a_task_file_names_the_key(extra_conf):
    write_task(extra_conf, "typo", GOOD_TASK.format(name="typo") + "hiden_tests: [x]\n")
    with pytest.raises(ConfigError, match=r"task broken/typo \(flavor coding\): unknown config key 'task.hiden_tests'"):
        to_typed(compose_config(["task=broken/typo"]))


def test_a_wrong_type_in_a_task_file_names_the_key(extra_conf):
    write_task(extra_conf, "wrongtype", GOOD_TASK.format(name="wrongtype") + "test_timeout: soon\n")
    with pytest.raises(
        ConfigError, match=r"task broken/wrongtype \(flavor coding\): bad config value at 'task.test_timeout'"
    ):
        to_typed(compose_config(["task=broken/wrongtype"]))


def test_missing_task_names_the_group():
    with pytest.raises(ConfigError, match="no task selected"):
        compose_config([])


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("run", "task=sample/x_does_not_exist"),
        ("run", "-m", "task=glob(sample/*)", "agnt=noop"),
        ("run", "task=glob(zzz/*)"),
        ("check", "task=glob(sample/*)", "task.promt=x"),
        ("build", "task=glob(sample/*)", "agent=nope", "--dry-run"),
        ("query", "SELEC 1"),
        ("show", "no-such-run"),
        ("frobnicate",),
    ],
)
def test_user_mistakes_give_one_line_and_a_nonzero_exit(args):
    proc = run_cli(*args)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("crucible")


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("run", "task=glob(sample/*)", "-m"),
        ("check", "task=glob(sample/*)"),
        ("build", "task=glob(sample/*)", "--dry-run"),
    ],
)
def test_an_unreachable_engine_is_one_line_naming_the_fix(args, tmp_path):
    proc = run_cli(*args, env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Docker engine unreachable" in lines[0] and "crucible doctor --fix" in lines[0], lines
    assert "Traceback" not in proc.stdout + proc.stderr


def test_threads_can_compose_at_the_same_time():
    """Hydra's compose API goes through one global; a threaded caller (the model stand-in's
    request handlers, a parallel check) must not see "GlobalHydra is already initialized"."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = [f"task=sample/{name}" for name in ("last_page", "negative_money", "query_ops", "snapshot_alias")] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        composed = list(pool.map(lambda option: compose_config([option]).task.name, tasks))
    assert composed == [option.split("/")[-1] for option in tasks]


VALUE_OVERRIDES = [
    ["seed=7"],
    ["seed=-3", "attempt=2", "resume=true"],
    ["timeouts.agent=31", "timeouts.grade=12.5"],
    ["model=null"],
    ["model=openai/gpt-4o-mini"],
    ["store=/tmp/elsewhere.duckdb"],
    ["runtime.install_timeout=60", "runtime.bwrap=/usr/local/bin/bwrap"],  # keys the option's file omits
]


@pytest.mark.parametrize("values", VALUE_OVERRIDES, ids=lambda v: " ".join(v))
def test_value_overrides_applied_after_the_cached_group_choices_give_hydras_config(values):
    """The evaluation cache composes a task's group choices once and applies plain value
    overrides after (as Hydra does, after the defaults list): the result is Hydra's own."""
    from omegaconf import OmegaConf

    from engine.config import compose

    overrides = ["task=sample/query_ops", "integrity=strict", "runtime=local", *values]
    shortcut = compose._from_group_choices(overrides)
    assert shortcut is not None, "these overrides should be answered from the group choices"
    hydra = compose._compose(overrides)
    assert OmegaConf.to_container(shortcut, resolve=True) == OmegaConf.to_container(hydra, resolve=True)
    assert to_typed(shortcut) == to_typed(hydra)


def test_a_new_value_is_not_a_new_compose_but_a_bad_one_still_gets_hydras_error(monkeypatch):
    from engine.config import compose

    compose_config(["task=sample/last_page", "agent=noop", "seed=1"])  # the group choices, composed once

    def no_hydra(overrides, **kwargs):
        raise AssertionError(f"Hydra composed {overrides}")

    with monkeypatch.context() as patched:
        patched.setattr(compose, "_compose", no_hydra)
        for seed in (2, 3):
            assert compose_config(["task=sample/last_page", "agent=noop", f"seed={seed}"]).seed == seed
    # Refused by the schemas: the shortcut steps aside and Hydra's own one-line error is what shows.
    with pytest.raises(ConfigError, match="bad value in override 'seed=abc'"):
        compose_config(["task=sample/last_page", "agent=noop", "seed=abc"])
    with pytest.raises(ConfigError, match="unknown config key 'nosuchkey'"):
        compose_config(["task=sample/last_page", "agent=noop", "nosuchkey=3"])
    # Not a plain value (Hydra's grammar needed): composed by Hydra, never guessed.
    assert compose._from_group_choices(["task=sample/last_page", "+extra=[1,2]"]) is None


def test_a_sweeps_parallelism_is_no_part_of_its_jobs_configs(monkeypatch):
    """``hydra.launcher.n_jobs`` (the bench's and many users' sweeps) configures the launcher,
    not a job: validating a sweep with a new seed composes nothing through Hydra."""
    from engine.cli.run import _validate
    from engine.config import compose

    sweep = ["task=sample/last_page,sample/query_ops", "agent=noop", "hydra.launcher.n_jobs=2"]
    _validate([*sweep, "seed=21"])  # the group choices, composed once

    def no_hydra(overrides, **kwargs):
        raise AssertionError(f"Hydra composed {overrides}")

    monkeypatch.setattr(compose, "_compose", no_hydra)
    composed, _ = _validate([*sweep, "seed=22"])
    assert [cfg.seed for _, cfg in composed if cfg is not None] == [22, 22]
    assert all("hydra.launcher.n_jobs=2" in combo for combo, _ in composed)  # still the sweep's


def test_a_compose_answered_from_the_cache_is_the_config_as_composed():
    """Kept pickled: the answer is the same plain config (values, interpolations resolved, no
    flags of Hydra's), each answer an object of its own (a caller may set its sweep id)."""
    from omegaconf import OmegaConf

    from engine.config import compose

    for overrides in (["task=sample/query_ops", "agent=noop", "seed=41"], ["task=sample/query_ops", "+extra=[1,2]"]):
        first = compose_config(overrides)  # composed (the shortcut, or Hydra), then kept
        again, other = compose_config(overrides), compose_config(overrides)
        assert OmegaConf.to_container(again) == OmegaConf.to_container(first, resolve=True)
        assert not OmegaConf.is_struct(again) and not OmegaConf.is_readonly(again)
        again.seed = 99
        assert other.seed == first.seed != 99
    assert compose._cache_read(compose._cache_key(["task=sample/query_ops", "+extra=[1,2]"])) is not None


def test_a_config_dirs_digest_is_kept_by_its_files_stats_and_never_for_a_file_just_written(tmp_path, monkeypatch):
    """The config dirs' part of a cache key is kept by their files' stats, and only where every
    file is older than ``RACY_NS`` (a file rewritten within one timestamp tick at the same size
    has the same stats): an edited or added file is read again; one just written is never kept."""
    from engine.config import compose

    extra = tmp_path / "conf"
    (extra / "task").mkdir(parents=True)
    (extra / "task" / "mine.yaml").write_text("name: mine\n")
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(extra))
    monkeypatch.setattr(compose, "_DIR_DIGESTS", {})
    first = compose._cache_key(["task=mine"])
    assert not any(str(extra.resolve()) in key for key in compose._DIR_DIGESTS)  # just written: not kept

    monkeypatch.setattr(compose, "RACY_NS", -(10**18))  # every file counts as old from here
    assert compose._cache_key(["task=mine"]) == first
    assert any(str(extra.resolve()) in key for key in compose._DIR_DIGESTS)  # kept now
    read_bytes = Path.read_bytes

    def not_mine_again(path: Path) -> bytes:
        if extra in path.parents:
            pytest.fail(f"read {path} again")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", not_mine_again)
    assert compose._cache_key(["task=mine"]) == first  # answered by the stats alone
    monkeypatch.undo()
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(extra))
    monkeypatch.setattr(compose, "RACY_NS", -(10**18))
    (extra / "task" / "mine.yaml").write_text("name: yours!\n")
    edited = compose._cache_key(["task=mine"])
    assert edited != first
    (extra / "task" / "other.yaml").write_text("name: other\n")
    assert compose._cache_key(["task=mine"]) not in (first, edited)


# ---------------------------------------------------------------- what a new user stumbled on (issue 39)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["timeouts.agent=-1"], "timeouts.agent must be positive, got -1"),
        (["timeouts.setup=0"], "timeouts.setup must be positive, got 0"),
        (["timeouts.grade=-0.5"], "timeouts.grade must be positive, got -0.5"),
        (["timeouts.capture=nan"], "timeouts.capture must be positive, got nan"),
        (["env.bash_timeout=0"], "env.bash_timeout must be positive, got 0"),
        (["runtime.api_timeout=-1"], "runtime.api_timeout must be positive, got -1"),
        (["runtime=local", "runtime.install_timeout=0"], "runtime.install_timeout must be positive, got 0"),
        (["agent=integration_test", "agent.timeout_seconds=0"], "agent.timeout_seconds must be positive, got 0"),
        (["agent=tool_calling", "agent.request_timeout=-2"], "agent.request_timeout must be positive, got -2"),
        (["agent=tool_calling", "agent.wall_timeout=0"], "agent.wall_timeout must be positive, got 0"),
        (
            ["agent=claude_code", "agent.wall_timeout=-5"],
            "agent.wall_timeout must be positive, got -5",
        ),  # a plug-in's schema
        (
            ["task=sdlc/last_page", "+task.judge.request_timeout=0"],
            "task sdlc/last_page (flavor sdlc): task.judge.request_timeout must be positive, got 0",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_timeout_of_zero_or_less_is_refused_naming_the_key_and_value(overrides, message):
    task = [] if any(o.startswith("task=") for o in overrides) else ["task=sample/last_page"]
    with pytest.raises(ConfigError) as refused:
        to_typed(compose_config([*task, *overrides]))
    assert str(refused.value) == message


def test_a_timeout_of_zero_in_a_task_file_is_refused_naming_the_task(extra_conf):
    write_task(extra_conf, "zero_timeout", GOOD_TASK.format(name="zero_timeout") + "test_timeout: 0\n")
    with pytest.raises(ConfigError) as refused:
        to_typed(compose_config(["task=broken/zero_timeout"]))
    assert str(refused.value) == "task broken/zero_timeout (flavor coding): task.test_timeout must be positive, got 0"


@pytest.mark.parametrize("key", ["test_timeout", "step_timeout"])
def test_swebench_pro_task_timeouts_are_refused_by_the_same_rule(key):
    """The engine knows no flavor's keys: the rule is the field's name, so a SWE-bench Pro row's
    limits are refused as a coding task's are (composing one needs a dataset, hence the schema)."""
    from engine.config.schema import refuse_nonpositive_timeouts
    from swe_tasks.schema import SwebenchProTaskConfig

    row = dict(
        name="i",
        set="swebench_pro",
        prompt="p",
        instance_id="i",
        repo="r",
        base_commit="c",
        patch="",
        problem_statement="p",
        assets="/a",
    )
    refuse_nonpositive_timeouts(SwebenchProTaskConfig(**row), "task")  # its defaults are fine
    with pytest.raises(ConfigError, match=rf"^task\.{key} must be positive, got -1$"):
        refuse_nonpositive_timeouts(SwebenchProTaskConfig(**row, **{key: -1.0}), "task")


@pytest.mark.parametrize("command", [["run", "agent=noop"], ["check"], ["build", "--dry-run"]])
def test_a_negative_timeout_is_one_line_from_the_commands(command):
    proc = run_cli(*command, "task=sample/last_page", "timeouts.agent=-1")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"crucible {command[0]}: timeouts.agent must be positive, got -1"]


BROKEN_YAML = {
    # An unclosed flow sequence: the parser gives up on the next line, where the next key starts.
    "unclosed": (
        "name: unclosed\nset: broken\nprompt: [fix the\nrepo: generated://sample\n",
        "line 4, column 5: YAML syntax error: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence from line 3, column 9)",
    ),
    "tab": (
        "name: tab\nset: broken\n\tprompt: p\n",
        "line 3, column 1: YAML syntax error: found character '\\t' that cannot start any token; "
        "YAML indents with spaces, never tabs",
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_YAML))
@pytest.mark.parametrize(
    "command",
    [["run", "agent=noop"], ["run", "-m", "agent=noop,integration_test"], ["check"], ["build", "--dry-run"]],
    ids=["run", "sweep", "check", "build"],
)
def test_a_task_yaml_with_a_syntax_error_is_one_line_naming_file_line_and_column(extra_conf, command, kind):
    text, where = BROKEN_YAML[kind]
    write_task(extra_conf, kind, text)
    proc = run_cli(*command, f"task=broken/{kind}")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    path = extra_conf / "task" / "broken" / f"{kind}.yaml"
    assert proc.stderr.splitlines() == [f"crucible {command[0]}: {path}, {where}"]


def test_a_syntax_error_in_one_task_of_a_glob_names_that_file(extra_conf):
    write_task(extra_conf, "a_good", GOOD_TASK.format(name="a_good"))
    write_task(extra_conf, "b_tab", BROKEN_YAML["tab"][0].replace("name: tab", "name: b_tab"))
    with pytest.raises(ConfigError, match=r"/task/broken/b_tab\.yaml, line 3, column 1: YAML syntax error"):
        for combo in combinations(["task=glob(broken/*)"]):
            compose_config(combo)


def test_a_task_yaml_from_an_earlier_version_says_its_defaults_list_is_no_longer_needed(extra_conf):
    """Task YAMLs once began with a defaults list naming a base config that no longer exists."""
    write_task(extra_conf, "old", "defaults: [/task/base_task@_here_, _self_]\n" + GOOD_TASK.format(name="old"))
    proc = run_cli("build", "--dry-run", "task=broken/old")
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    path = extra_conf / "task" / "broken" / "old.yaml"
    assert proc.stderr.splitlines() == [
        f"crucible build: {path}: its defaults list (/task/base_task@_here_) is from an earlier crucible and no "
        "longer needed: delete it (a task's schema now comes from its flavor)"
    ]
    # Without the list the same task composes: the list was the only thing wrong.
    write_task(extra_conf, "old", GOOD_TASK.format(name="old"))
    assert compose_config(["task=broken/old"]).task.name == "old"


def task_set_folders() -> list[str]:
    """The task sets, counted independently of crucible: folders under each config dir's task/, at
    any depth (``harbor/dataset``), that hold a YAML file (a task, or a task source's _source.yaml)."""
    dirs = [ROOT / "conf", *(Path(p) for p in os.environ.get("CRUCIBLE_CONFIG_PATH", "").split(":") if p)]
    return sorted(
        {
            y.parent.relative_to(root / "task").as_posix()
            for root in dirs
            if (root / "task").is_dir()
            for y in (root / "task").rglob("*.yaml")
            if y.parent != root / "task"
        }
    )


@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["run", "agent=noop"],
        ["run"],
        ["run", "-m", "agent=noop,integration_test"],
        ["build", "--dry-run"],
        ["lock"],
    ],
    ids=" ".join,
)
def test_a_missing_task_says_how_to_choose_one_and_lists_the_sets(extra_conf, command):
    write_task(extra_conf, "fine", GOOD_TASK.format(name="fine"))
    (extra_conf / "task" / "empty_set").mkdir()  # no task in it: no set to choose
    proc = run_cli(*command)
    assert proc.returncode == 2 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    sets = task_set_folders()
    assert {"sample", "sdlc", "toy", "broken"} <= set(sets)  # conf/'s, the fixtures' and this test's own
    assert proc.stderr.splitlines() == [
        f"crucible {command[0]}: no task selected: add task=SET/NAME, or "
        f"task='glob(SET/*)' for a whole set; task sets: {', '.join(sets)}"
    ]


def test_jobs_differing_only_in_seed_attempt_or_sweep_are_typed_once(monkeypatch):
    """Seed, attempt and sweep id, which no schema reads, do not key the typed cache: a sweep's
    jobs are typed once, each with its own values set; a value of the wrong type is still typed,
    and refused."""
    from engine.config import schema

    real, calls = schema.typed, []
    monkeypatch.setattr(schema, "typed", lambda cfg, **kw: calls.append(cfg) or real(cfg, **kw))
    base = ["task=sample/last_page", "agent=noop"]
    jobs = [["seed=917001"], ["seed=917002", "attempt=3"], ["seed=917003", "sweep_id=20261206-sweep"]]
    typed = [to_typed(compose_config([*base, *job])) for job in jobs]
    assert len(calls) <= 1  # the first job's, unless an earlier test typed its siblings already
    assert [(t.seed, t.attempt, t.sweep_id) for t in typed] == [
        (917001, 0, None),
        (917002, 3, None),
        (917003, 0, "20261206-sweep"),
    ]
    for job, got in zip(jobs, typed):
        assert got == real(compose_config([*base, *job]))  # as typing it afresh gives
    with pytest.raises(ConfigError, match="seed"):
        to_typed(compose_config([*base, "seed=many"]))
