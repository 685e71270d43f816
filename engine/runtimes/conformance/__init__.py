"""The ``Workspace`` contract (engine/interfaces.py) as checks any runtime runs on itself.

Like Inspect's ``util/_sandbox/self_check.py``: every check is an ``async def check_*``
that raises ``ConformanceFailure`` (an ``AssertionError``) saying what broke. ``CHECKS``
lists them; ``run_conformance(runtime, image)`` provisions from a runtime and runs them
all; tests/runtimes/test_workspace_conformance.py runs each as one pytest test per runtime. By
hand (engine/cli/conformance.py, which composes the config and builds the image first):

    python -m engine.cli.conformance runtime=docker [task=sample/last_page] [overrides]

A check runs on one shared network-less workspace, or (``fresh``) gets the ``Target`` and
provisions its own. What a check needs from outside the workspace comes from the runtime's
``Probe`` (``<runtime package>.conformance.probe(runtime)``): ``leftovers(run_id)`` and the
env names a command may see beyond its env. A check that only some backends can be held to
names capabilities in ``needs``; a runtime whose probe lacks one has the check skipped.
"""

# The package, by module (none of them is imported from directly: everything public is re-exported here):
#   _core.py              how a check fails (ConformanceFailure, expect, raises); the capabilities a
#                         probe may have; what a check runs against (Probe, BlindProbe, probe_for,
#                         Target); the registry (Check, CHECKS, @check)
#   _helpers.py           what the checks share: a check's own ``sleep`` processes, found via /proc
#   _exec.py              exec: exit code and streams, user, cwd, env, timeouts, cancels, output, stdin
#   _files.py             write_file / read_file
#   _network.py           isolation: loopback only, network=True, the read-only bridge
#   _open_process.py      open_process: streams, close_stdin, wait, kill; stderr kept apart; a tty
#   _cleanup.py           nothing left behind, however a workspace's block ends
#   _backend_specific.py  checks only probes with a capability get (Docker's init and labels, the backstop)
#   __init__.py (here)    the public API and the runner (run_check, run_conformance); the by-hand
#                         entry is engine/cli/conformance.py
from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from engine.interfaces import Runtime, Workspace
from engine.runtimes.conformance._backend_specific import (
    check_backstop_reports_a_timeout_when_the_in_container_timeout_fails,
    check_container_runs_an_init_with_owner_labels,
)
from engine.runtimes.conformance._cleanup import (
    Boom,
    check_cancel_while_provisioning_leaves_nothing_behind,
    check_close_is_idempotent,
    check_workspace_is_destroyed_however_the_block_ends,
)
from engine.runtimes.conformance._core import (
    CHECKS,
    DOCKER_CONTAINER,
    EXEC_BACKSTOP,
    LEFTOVERS,
    BlindProbe,
    Check,
    ConformanceFailure,
    Probe,
    Target,
    check,
    expect,
    fresh_run_id,
    probe_for,
    raises,
)

# Each check registers itself in CHECKS when its module is imported: the order of these imports
# is the order the checks run in.
from engine.runtimes.conformance._exec import (
    check_cancelling_an_exec_kills_its_command,
    check_exec_env_replaces_the_engine_environment,
    check_exec_feeds_stdin_while_reading_output,
    check_exec_in_a_missing_cwd_raises_workspace_error,
    check_exec_keeps_head_and_tail_of_huge_output_without_deadlock,
    check_exec_leaves_the_event_loop_free,
    check_exec_of_a_missing_program_exits_127,
    check_exec_reports_exit_code_and_stdout_stderr_separately,
    check_exec_returns_when_the_command_exits_though_a_background_child_holds_its_output,
    check_exec_runs_as_root_by_default_and_as_the_agent_uid_when_asked,
    check_exec_runs_in_the_given_cwd,
    check_exec_that_finishes_in_time_is_not_timed_out,
    check_exec_timeout_kills_the_whole_process_group,
    check_workspace_satisfies_the_protocol,
)
from engine.runtimes.conformance._files import (
    check_files_round_trip_binary_bytes_mode_and_owner,
    check_read_file_follows_a_symlink,
    check_read_file_of_a_directory_raises_is_a_directory,
    check_read_file_of_a_missing_path_raises_file_not_found,
    check_write_file_replaces_an_existing_file,
)
from engine.runtimes.conformance._helpers import (
    expect_no_sleepers,
    kill_sleepers,
    marker,
    processes_sleeping,
    wait_for_sleepers,
)
from engine.runtimes.conformance._network import (
    check_a_bridge_is_read_only_inside_and_its_unix_socket_is_reachable_without_network,
    check_network_false_leaves_only_loopback,
    check_network_true_has_a_real_interface,
)
from engine.runtimes.conformance._open_process import (
    check_after_close_stdin_a_write_fails_and_a_second_close_does_nothing,
    check_open_process_can_keep_stderr_apart,
    check_open_process_kill_ends_the_whole_group,
    check_open_process_streams_stdin_to_merged_output,
    check_open_process_with_a_tty_gives_the_command_a_sized_terminal_it_owns,
)

__all__ = [
    # _core
    "LEFTOVERS",
    "DOCKER_CONTAINER",
    "EXEC_BACKSTOP",
    "ConformanceFailure",
    "expect",
    "raises",
    "Probe",
    "BlindProbe",
    "probe_for",
    "Target",
    "fresh_run_id",
    "Check",
    "CHECKS",
    "check",
    # here: the runner
    "CHECK_TIMEOUT",
    "CheckResult",
    "run_check",
    "run_conformance",
    # _helpers
    "marker",
    "processes_sleeping",
    "wait_for_sleepers",
    "kill_sleepers",
    "expect_no_sleepers",
    # _exec
    "check_workspace_satisfies_the_protocol",
    "check_exec_reports_exit_code_and_stdout_stderr_separately",
    "check_exec_runs_as_root_by_default_and_as_the_agent_uid_when_asked",
    "check_exec_runs_in_the_given_cwd",
    "check_exec_env_replaces_the_engine_environment",
    "check_exec_timeout_kills_the_whole_process_group",
    "check_cancelling_an_exec_kills_its_command",
    "check_exec_that_finishes_in_time_is_not_timed_out",
    "check_exec_returns_when_the_command_exits_though_a_background_child_holds_its_output",
    "check_exec_keeps_head_and_tail_of_huge_output_without_deadlock",
    "check_exec_feeds_stdin_while_reading_output",
    "check_exec_of_a_missing_program_exits_127",
    "check_exec_in_a_missing_cwd_raises_workspace_error",
    "check_exec_leaves_the_event_loop_free",
    # _files
    "check_files_round_trip_binary_bytes_mode_and_owner",
    "check_write_file_replaces_an_existing_file",
    "check_read_file_of_a_missing_path_raises_file_not_found",
    "check_read_file_of_a_directory_raises_is_a_directory",
    "check_read_file_follows_a_symlink",
    # _network
    "check_network_false_leaves_only_loopback",
    "check_network_true_has_a_real_interface",
    "check_a_bridge_is_read_only_inside_and_its_unix_socket_is_reachable_without_network",
    # _open_process
    "check_open_process_streams_stdin_to_merged_output",
    "check_after_close_stdin_a_write_fails_and_a_second_close_does_nothing",
    "check_open_process_kill_ends_the_whole_group",
    "check_open_process_can_keep_stderr_apart",
    "check_open_process_with_a_tty_gives_the_command_a_sized_terminal_it_owns",
    # _cleanup
    "Boom",
    "check_close_is_idempotent",
    "check_workspace_is_destroyed_however_the_block_ends",
    "check_cancel_while_provisioning_leaves_nothing_behind",
    # _backend_specific
    "check_container_runs_an_init_with_owner_labels",
    "check_backstop_reports_a_timeout_when_the_in_container_timeout_fails",
]


# -- the runner ---------------------------------------------------------------------------------

CHECK_TIMEOUT = 300.0


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    seconds: float
    message: str = ""
    skipped: bool = False


async def run_check(check: Check, target: Target, shared: Workspace | None) -> CheckResult:
    missing = check.missing(target.probe)
    if missing:
        return CheckResult(check.name, False, 0.0, f"needs {', '.join(sorted(missing))}", skipped=True)
    started = time.monotonic()
    deadline = asyncio.timeout(CHECK_TIMEOUT)
    try:
        async with deadline:
            await check.run(target, shared)
    except Exception as exc:  # every failure is a result; only a cancel of the whole run ends it
        if deadline.expired():
            message = f"did not finish within {CHECK_TIMEOUT:.0f} s"
        elif isinstance(exc, ConformanceFailure):
            message = str(exc)
        else:
            message = f"{type(exc).__name__}: {exc}"
        return CheckResult(check.name, False, time.monotonic() - started, " ".join(message.split()))
    return CheckResult(check.name, True, time.monotonic() - started)


async def run_conformance(
    runtime: Runtime,
    image: object,
    *,
    probe: Probe | None = None,
    checks: list[Check] | None = None,
    purpose: str = "conformance",
) -> list[CheckResult]:
    """Run every check (or ``checks``) against ``runtime``, one after the other."""
    target = Target(runtime, image, probe or probe_for(runtime), purpose)
    results = []
    async with contextlib.AsyncExitStack() as stack:
        try:
            shared = await stack.enter_async_context(target.provision())
        except Exception as exc:  # reported; the fresh-workspace checks still run
            shared = None
            results.append(CheckResult("provision_shared_workspace", False, 0.0, f"{type(exc).__name__}: {exc}"))
        for one in CHECKS if checks is None else checks:
            results.append(await run_check(one, target, shared))
    return results
