"""Scoring conversations straight from OTLP files (``toolscore evaluate``'s use case).

The files are what the OpenTelemetry Collector's ``file`` exporter writes: one OTLP/JSON export
request per line (traces and logs, in one file or several), plain or gzip. They go through the
server's own path, on a throw-away SQLite database: decoded as the receiver decodes, stored by
the ingest writer with the conversation hook, matched to the expectations and scored by the
pipeline's rounds, with every conversation complete at once (the files are all there is).
"""

from __future__ import annotations

import asyncio
import gzip
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import IngestConfig, IngestWriter
from toolscore.collector.otlp.decode import (
    DecodeError,
    DecodeLimits,
    decode_logs,
    decode_traces,
    parse_logs_json,
    parse_traces_json,
)
from toolscore.collector.pipeline.assign import AssignConfig
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.hook import ConversationHook
from toolscore.collector.pipeline.rounds import RoundRunner
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
)
from toolscore.scorer import ScoringConfig
from toolscore.storage.database import open_database
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.history.reading import ConversationOutcome, outcomes
from toolscore.storage.records import LogRecordData, SpanRecord

_GZIP_MAGIC = b"\x1f\x8b"
_ALL_AT_ONCE = Timing(settle_s=0.0, idle_s=0.0)


class EvaluateError(ValueError):
    """An input file that cannot be read; the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class EvaluateOptions:
    config: ScoringConfig
    conversation_keys: tuple[str, ...] = DEFAULT_CONVERSATION_KEYS
    reference_key: str = DEFAULT_REFERENCE_KEY
    control_calls: ControlCalls = DEFAULT_CONTROL


@dataclass(frozen=True, slots=True)
class Loaded:
    spans: tuple[SpanRecord, ...]
    logs: tuple[LogRecordData, ...]
    rejected: int  # spans and records the decoder refused (as the receiver would)


def read_otlp_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of ``path`` (gzip or plain), numbered from 1."""
    try:
        with path.open("rb") as probe:
            packed = probe.read(2) == _GZIP_MAGIC
        opener = gzip.open if packed else open
        with opener(path, "rb") as stream:
            for number, line in enumerate(stream, 1):
                if line.strip():
                    yield number, line
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise EvaluateError(f"{path}: cannot read: {exc}") from exc


def load(paths: Sequence[Path], limits: DecodeLimits | None = None) -> Loaded:
    """Every span and log record of the files, decoded exactly as the receiver decodes them."""
    limits = limits or DecodeLimits()
    spans: list[SpanRecord] = []
    logs: list[LogRecordData] = []
    rejected = 0
    for path in paths:
        for number, line in read_otlp_lines(path):
            try:
                if b"resourceLogs" in line or b"resource_logs" in line:
                    decoded_logs = decode_logs(parse_logs_json(line), limits)
                    logs.extend(decoded_logs.records)
                    rejected += decoded_logs.rejected
                else:
                    decoded = decode_traces(parse_traces_json(line), limits)
                    spans.extend(decoded.spans)
                    rejected += decoded.rejected
            except DecodeError as exc:
                raise EvaluateError(f"{path}:{number}: {exc}") from exc
    return Loaded(tuple(spans), tuple(logs), rejected)


def evaluate(
    loaded: Loaded, expectations: Sequence[ExpectationData], options: EvaluateOptions
) -> list[ConversationOutcome]:
    """Store, match and score ``loaded`` on a temporary database; every conversation's outcome."""
    with tempfile.TemporaryDirectory(prefix="toolscore-evaluate-") as workdir:
        url = f"sqlite:///{Path(workdir) / 'evaluate.db'}"
        engine = open_database(url, upgrade=True)
        try:
            with engine.begin() as conn:
                import_expectations(conn, expectations)
            hook = ConversationHook(
                AssignConfig(options.conversation_keys, options.reference_key), _ALL_AT_ONCE
            )
            asyncio.run(_ingest(IngestWriter(engine, IngestConfig(), [hook], Metrics()), loaded))
            _score_all(engine, options)
            with engine.connect() as conn:
                return list(outcomes(conn))
        finally:
            engine.dispose()


async def _ingest(writer: IngestWriter, loaded: Loaded, batch: int = 5_000) -> None:
    await writer.start()
    try:
        for start in range(0, max(len(loaded.spans), len(loaded.logs)), batch):
            await writer.submit(
                loaded.spans[start : start + batch], loaded.logs[start : start + batch]
            )
    finally:
        await writer.stop()


def _score_all(engine: Any, options: EvaluateOptions) -> None:
    # every conversation is complete: the clock stands a second past the last span received
    now_ns = time.time_ns() + 1_000_000_000
    runner = RoundRunner(
        engine,
        options.config,
        timing=_ALL_AT_ONCE,
        batch_size=200,
        worker_id="evaluate",
        clock_ns=lambda: now_ns,
        control_calls=options.control_calls,
    )
    while runner.run_once().claimed:
        pass


def outcome_row(outcome: ConversationOutcome, metrics: Sequence[str]) -> dict[str, Any]:
    """One output line: ``toolscore score``'s row shape, keyed by conversation id."""
    row: dict[str, Any] = {"id": outcome.id, "status": outcome.status}
    if outcome.expectation_id is not None:
        row["expectation"] = f"{outcome.expectation_id}@{outcome.expectation_version}"
    by_metric = {e.metric: e for e in outcome.evaluations}
    details: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in metrics:
        evaluation = by_metric.get(name)
        row[name] = None if evaluation is None else evaluation.score
        if evaluation is None:
            errors[name] = outcome.error or f"not scored (conversation {outcome.status})"
            continue
        details[name] = evaluation.details
        if evaluation.error:
            errors[name] = evaluation.error
    row["details"] = details
    if errors:
        row["errors"] = errors
    return row
