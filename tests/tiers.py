"""The quick tier: which tests are ``slow`` (``python -m pytest -m "not slow"`` leaves them out).

``conftest.pytest_collection_modifyitems`` marks a test slow when it

- lives in ``tests/integration/``, in ``benchmarks/tests/`` (the benchmark scripts' own tests),
  in a file of :data:`SLOW_FILES` (lint, type checks, the house rules, packaging, a browser,
  promtool) or in a file that drives a real agent framework (:data:`FRAMEWORK_FILES`: importing
  one costs seconds of CPU). A quick run does not even collect those files (:func:`skip_file`);
- uses PostgreSQL (a fixture named ``*postgres*``, or ``db_url`` on its PostgreSQL side);
- starts a real server or a process, or asks Ragas (the parity oracle, 4 s of CPU to import):
  its function, a fixture it uses, or a helper either calls, mentions one of :data:`STARTS`
  (looked up two calls deep, among the tests' own helpers);
- was measured slow: :data:`MEASURED` lists the tests (a node id, or one without parameters for
  every case) whose setup, call and teardown took about a second or more in runs of the suite
  piece by piece (``--durations=0``) and that the rules above do not catch. Re-measure and edit
  it when a quick test grows slow.

Everything else is quick: the scorer, storage on a SQLite file, the conventions and
reconstruction, decoding, configuration and the commands called in-process.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

SLOW_FILES = (
    "tests/test_lint.py",
    "tests/test_house_rules.py",  # with test_layering: the house rules, also in scripts/check.py
    "tests/test_layering.py",
    "tests/test_packaging.py",
    "tests/test_prometheus_rules.py",
    "tests/collector/views/test_report.py",  # headless Chromium
)
FRAMEWORK_FILES = re.compile(
    r"tests/collector/reconstruction/(conventions/test_live_\w+|conventions/test_logfire_\w+"
    r"|test_control_calls)\.py$"
)
STARTS = re.compile(
    r"\bsubprocess\.|\bPopen\(|\bRunningServer\b|\bsys\.executable\b|\bchromium\b|\bApp\("
    r"|\bmultiprocessing\.|\bos\.fork\(|\bweb\.TCPSite\(|\bgrpc\.server\("
    r"|\bragas_oracle\b|\brequires_ragas\b|\bfrom ragas\b"
)
CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")

# Measured slow (about a second or more): a scoring child process, a forked command, a real OTLP
# sink, a sleep, a heavy import.
MEASURED: tuple[str, ...] = (
    "tests/scorer/test_assignment.py::test_agrees_with_scipy",  # imports SciPy
    "tests/scorer/test_nesting.py::test_hand_made_calls_get_an_error_score_not_a_recursion_error",
    "tests/collector/pipeline/test_control_calls_option.py::test_the_worker_scores_with_or_without_handoffs[sqlite-include-child-process]",
    "tests/collector/pipeline/test_control_calls_option.py::test_the_worker_scores_with_or_without_handoffs[sqlite-exclude-child-process]",
    "tests/collector/pipeline/test_worker.py::test_worker_scores_a_settled_conversation[sqlite-child-process]",
    "tests/collector/pipeline/test_score.py::test_a_span_arriving_while_scoring_keeps_the_conversation_pending",
    "tests/storage/plumbing/test_faults.py::test_an_integer_beyond_int64_is_a_data_fault",
    "tests/storage/history/test_tool_scores.py::test_views_count_what_the_explanations_say",
    "tests/storage/history/test_views.py::test_downgrade_removes_the_views",
    "tests/storage/history/test_views.py::test_views_match_an_independent_computation",
    "tests/storage/test_migrations.py::test_upgrade_downgrade_upgrade",
    "tests/collector/export/test_writeback.py::test_sink_outage_backs_off_then_delivers_everything_once",
    "tests/collector/ingest/test_ingest.py::test_queue_bound_refuses_with_a_retryable_error",
    "tests/collector/ingest/test_ingest.py::test_concurrent_requests_share_transactions_and_duplicates_are_ignored",
    "tests/collector/ingest/test_ingest.py::test_failed_transaction_acknowledges_nothing_and_a_retry_stores_once",
    "tests/collector/ingest/test_ingest.py::test_round_trip_preserves_every_value",
    "tests/collector/export/test_rescore.py::test_with_nothing_recorded_it_says_it_uses_the_defaults",
    "tests/collector/receiver/test_receiver_wire.py::test_what_parsing_otlp_json_costs_is_never_underestimated",
    "tests/collector/receiver/test_receiver_wire.py::test_a_big_items_nested_values_are_counted_and_counting_stops_over_the_limit",
    "tests/collector/receiver/test_receiver_admission.py::test_a_body_is_read_whole_or_refused_never_half",
    "tests/collector/commands/test_score_command.py::test_forked_shares_write_what_one_process_writes",
    "tests/collector/commands/test_score_command.py::test_the_command_writes_what_the_general_path_and_json_give",
    "tests/collector/commands/test_prune_command.py::test_new_sqlite_files_give_freed_pages_back",
    "tests/collector/commands/test_prune_command.py::test_prune_history_dry_run_counts_then_deletes_and_summarises",
    "tests/collector/commands/test_prune_command.py::test_dry_run_counts_then_prune_deletes_and_summarises",
    "tests/collector/commands/test_db_command.py::test_db_upgrade_then_current",
    "tests/collector/commands/test_db_command.py::test_a_long_migration_says_what_it_does",
    "tests/collector/upkeep/test_status.py::test_the_count_by_status_never_takes_more_than_a_thousandth_of_the_time",
    "tests/collector/upkeep/test_watchdog.py::test_a_stuck_writer_is_reported_refused_and_recovers",
    "tests/collector/upkeep/test_watchdog.py::test_shutting_out_answers_waiting_requests_unavailable_for_good",
    "tests/collector/upkeep/test_checkpoints.py::test_a_checkpoint_a_reader_held_back_is_tried_again_at_once",
    "tests/collector/upkeep/test_history_retention.py::test_show_of_a_deleted_conversation_says_so",
    "tests/collector/commands/test_score_command.py::test_forked_processes_hand_their_rows_through_a_pipe_when_the_output_has_no_descriptor",
    "tests/storage/plumbing/test_bulk_insert.py::test_execute_prepared_stores_what_a_plain_insert_stores",
)


def skip_file(path: str) -> bool:
    """Whether every test of the file at ``path`` (relative to the repository) is slow."""
    return (
        path.startswith(("tests/integration/", "benchmarks/"))
        or path in SLOW_FILES
        or FRAMEWORK_FILES.search(path) is not None
    )


def is_slow(item: pytest.Item) -> bool:
    path = item.nodeid.split("::", 1)[0]
    if skip_file(path):
        return True
    if _uses_postgres(item) or _starts_processes(item):
        return True
    return item.nodeid in MEASURED_SET or path in MEASURED_SET or _base_id(item) in MEASURED_SET


MEASURED_SET = frozenset(MEASURED)


def _base_id(item: pytest.Item) -> str:
    """The node id without its parameters: one entry covers every case of a test."""
    return item.nodeid.split("[", 1)[0]


def _uses_postgres(item: pytest.Item) -> bool:
    if any("postgres" in name for name in getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def _starts_processes(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if function is None or module is None:
        return False
    if _spawns(function, module, 2):
        return True
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixture in info.name2fixturedefs.get(name, ()) if info else ():
            func = getattr(fixture, "func", None)
            if func is not None and _spawns(func, inspect.getmodule(func) or module, 2):
                return True
    return False


@functools.cache
def _source(function: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(inspect.unwrap(function))
    except (OSError, TypeError):
        return ""


def _spawns(function: Callable[..., Any], module: ModuleType, depth: int) -> bool:
    """Whether ``function``, or a function of the tests it calls (``depth`` calls deep), starts
    a server or a process."""
    source = _source(function)
    if STARTS.search(source):
        return True
    if depth == 0:
        return False
    for name in set(CALLED.findall(source)):
        helper = getattr(module, name, None)
        home = inspect.getmodule(helper) if callable(helper) else None
        if home is None or not home.__name__.startswith("tests"):
            continue  # only the tests' own helpers: a library call is not a process
        if inspect.isfunction(helper) and _spawns(helper, home, depth - 1):
            return True
    return False
