"""The default deadlines meet the reliability targets (docs/reliability.md), by reasoning from
the configured values (the mechanisms themselves are measured with short deadlines in
tests/integration/test_half_open_database.py):

- /health 503 within 20 s of the database going silent: a probe or writer call in progress
  longer than --health-stuck-after is seen at the next watchdog check (every CHECK_PERIOD_S).
- exports succeed within 30 s of the network's return: the worst case is a writer call that
  met the silence just before the return; it is abandoned after --db-call-deadline (plus one
  sample of the call watch), the pool drops every older connection at that disconnect, the
  refusal is lifted at the next check, and the client's retry comes after --retry-after. A
  connection attempt in progress at the return ends within --db-connect-timeout instead,
  which is shorter.
- SIGTERM exits within 30 s: the receivers get --shutdown-grace, the writer and components
  STOP_EXTRA_S more, and the exit deadline fires HARD_EXIT_EXTRA_S after that in any case.
"""

from __future__ import annotations

import argparse

import pytest

from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.settings import Settings
from toolscore.collector.upkeep.shutdown import HARD_EXIT_EXTRA_S, STOP_EXTRA_S
from toolscore.collector.upkeep.watchdog import CHECK_PERIOD_S
from toolscore.storage.plumbing.engine import TCP_USER_TIMEOUT_S

HEALTH_503_TARGET = 20.0
RECOVERY_TARGET = 30.0
SIGTERM_TARGET = 30.0


def _defaults() -> Settings:
    return Settings.from_args(argparse.Namespace(), {})


def test_default_values() -> None:
    s = _defaults()
    assert (s.db_connect_timeout_s, s.db_statement_timeout_s, s.db_lock_timeout_s) == (10, 15, 10)
    assert (s.db_idle_in_transaction_timeout_s, s.db_call_deadline_s) == (60, 20)
    assert (s.health_stuck_after_s, s.shutdown_grace_s, s.retry_after_s) == (10, 10, 1)


def test_health_turns_503_within_the_target() -> None:
    s = _defaults()
    assert s.health_stuck_after_s + CHECK_PERIOD_S < HEALTH_503_TARGET  # 11 s


def test_exports_resume_within_the_target_after_the_network_returns() -> None:
    s = _defaults()
    sample = min(0.5, s.db_call_deadline_s / 4)  # CallWatch.period_s
    stuck_call = s.db_call_deadline_s + sample
    worst = max(stuck_call, s.db_connect_timeout_s) + CHECK_PERIOD_S + s.retry_after_s
    assert worst < RECOVERY_TARGET  # 22.5 s


def test_sigterm_exits_within_the_target_whatever_the_database_does() -> None:
    s = _defaults()
    assert s.shutdown_grace_s + STOP_EXTRA_S + HARD_EXIT_EXTRA_S < SIGTERM_TARGET  # 17 s


def test_deadlines_are_ordered_so_only_a_silent_connection_is_abandoned() -> None:
    s = _defaults()
    # the server cancels slow statements and lock waits before the client gives up on them
    assert s.db_lock_timeout_s <= s.db_statement_timeout_s < s.db_call_deadline_s
    # the kernel's own verdict on unacknowledged data comes no later than ours
    assert s.db_call_deadline_s >= TCP_USER_TIMEOUT_S


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_every_deadline_has_a_flag_and_an_environment_variable() -> None:
    env = {
        "TOOLSCORE_DB_CONNECT_TIMEOUT": "3",
        "TOOLSCORE_DB_STATEMENT_TIMEOUT": "4",
        "TOOLSCORE_DB_LOCK_TIMEOUT": "1.5",
        "TOOLSCORE_DB_IDLE_IN_TRANSACTION_TIMEOUT": "30",
        "TOOLSCORE_DB_CALL_DEADLINE": "6",
        "TOOLSCORE_HEALTH_STUCK_AFTER": "2",
    }
    s = Settings.from_args(_args(), env)
    assert (s.db_connect_timeout_s, s.db_statement_timeout_s, s.db_lock_timeout_s) == (3, 4, 1.5)
    assert (s.db_idle_in_transaction_timeout_s, s.db_call_deadline_s) == (30, 6)
    assert s.health_stuck_after_s == 2
    flags = _args(
        "--db-connect-timeout", "5", "--db-statement-timeout", "7", "--db-lock-timeout", "2",
        "--db-idle-in-transaction-timeout", "9", "--db-call-deadline", "8",
        "--health-stuck-after", "1",
    )  # fmt: skip
    s = Settings.from_args(flags, env)  # flags beat the environment
    assert (s.db_connect_timeout_s, s.db_statement_timeout_s, s.db_lock_timeout_s) == (5, 7, 2)
    assert (s.db_idle_in_transaction_timeout_s, s.db_call_deadline_s) == (9, 8)
    assert s.health_stuck_after_s == 1


def test_a_call_deadline_not_beyond_the_statement_timeout_is_refused() -> None:
    with pytest.raises(
        ConfigError, match="--db-call-deadline / TOOLSCORE_DB_CALL_DEADLINE must be"
    ):
        Settings.from_args(_args("--db-statement-timeout", "20", "--db-call-deadline", "20"), {})
    with pytest.raises(
        ConfigError, match="_LOCK_TIMEOUT: expected a number of seconds greater than 0"
    ):
        Settings.from_args(_args(), {"TOOLSCORE_DB_LOCK_TIMEOUT": "0"})
