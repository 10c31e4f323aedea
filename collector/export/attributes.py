"""What an exported evaluation says: attribute names, the pass/fail label, the explanation.

Pure functions, no OpenTelemetry import: the same attributes go on the evaluation span and on the
``gen_ai.evaluation.result`` log record, and the receiver uses :func:`is_toolscore_evaluation` to
drop the evaluation spans a Collector loops back to us (no feedback loop).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.storage.records import LogRecordData, SpanRecord

# OpenTelemetry GenAI semantic conventions (evaluation event and attributes).
EVALUATION_EVENT_NAME = "gen_ai.evaluation.result"
ATTR_EVALUATION_NAME = "gen_ai.evaluation.name"
ATTR_SCORE_VALUE = "gen_ai.evaluation.score.value"
ATTR_SCORE_LABEL = "gen_ai.evaluation.score.label"
ATTR_EXPLANATION = "gen_ai.evaluation.explanation"

# Evaluator and reference-set provenance, as proposed for the GenAI conventions
# (open-telemetry/semantic-conventions-genai PR #359; not yet in a release).
ATTR_EVALUATOR_ID = "gen_ai.evaluation.evaluator.id"
ATTR_EVALUATOR_VERSION = "gen_ai.evaluation.evaluator.version"
ATTR_EVALUATOR_TYPE = "gen_ai.evaluation.evaluator.type"
ATTR_REFERENCE_SET_ID = "gen_ai.evaluation.reference_set.id"
ATTR_REFERENCE_SET_VERSION = "gen_ai.evaluation.reference_set.version"
EVALUATOR_TYPE = "deterministic"  # the PR's values: llm_judge | deterministic | human

# toolscore's own attributes.
ATTR_MARKER = "toolscore.evaluation"  # always True on what we emit: the loop-back marker
ATTR_EXPECTATION_ID = "toolscore.expectation.id"
ATTR_EXPECTATION_VERSION = "toolscore.expectation.version"
ATTR_CONVERSATION_ID = "toolscore.conversation.id"
ATTR_REVISION = "toolscore.evaluation.revision"
ATTR_EVALUATION_ID = "toolscore.evaluation.id"
ATTR_METRIC_TYPE = "toolscore.metric.type"
ATTR_METRIC_CONFIG_HASH = "toolscore.metric.config_hash"
ATTR_PREDICTED_COUNT = "toolscore.tool_calls.predicted_count"
ATTR_EXPECTED_COUNT = "toolscore.tool_calls.expected_count"
ATTR_THRESHOLD = "toolscore.evaluation.threshold"
ATTR_ERROR = "toolscore.evaluation.error"
# why the conversation's rebuilt calls may be wrong (a name or arguments inferred without
# evidence, records that disagree, calls that could not be read): the score is given, marked
ATTR_WARNING = "toolscore.conversation.warning"

# Resource service.name and instrumentation scope of everything toolscore emits.
TOOLSCORE_SERVICE_NAME = "toolscore"
TOOLSCORE_SCOPE_NAME = "toolscore"

LABEL_PASS = "pass"
LABEL_FAIL = "fail"
LABEL_ERROR = "error"  # the conversation could not be scored (score is NULL)
# no score because what the metric compares was not recorded (details.label; see
# collector/pipeline/not_evaluated.py): not a failure of the agent, nor of toolscore
LABEL_NOT_EVALUATED = "not_evaluated"

# A tool-call metric is a correctness check: anything below a perfect score means at least one
# call was wrong, missing or extra, so by default only 1.0 passes. Lower it per metric.
DEFAULT_PASS_THRESHOLD = 1.0

EXPLANATION_MAX_CHARS = 500
MAX_REASONS = 3
_TEXT_KEYS = ("explanation", "reason", "summary", "message", "note")


def pass_label(score: float | None, threshold: float, details: Any = None) -> str:
    """``pass`` when ``score >= threshold``, ``fail`` below, ``error`` when there is no score
    (``not_evaluated`` when the details say so)."""
    if isinstance(details, Mapping) and details.get("label") == LABEL_NOT_EVALUATED:
        return LABEL_NOT_EVALUATED
    if score is None or math.isnan(score):
        return LABEL_ERROR
    return LABEL_PASS if score >= threshold else LABEL_FAIL


def threshold_for(metric: str, metric_type: str, thresholds: Mapping[str, float]) -> float:
    """The pass threshold of a metric instance: by instance name, then by type, then the default."""
    if metric in thresholds:
        return thresholds[metric]
    if metric_type in thresholds:
        return thresholds[metric_type]
    return DEFAULT_PASS_THRESHOLD


def explanation(
    score: float | None,
    error: str | None,
    details: Any,
    predicted_count: int | None,
    expected_count: int | None,
) -> str:
    """A short human sentence from the scorer's details (whatever their shape), never raising.

    The scorer's ``reasons`` (a list of sentences) come first, then the call counts; details of
    another shape are summarised as ``key=value`` pairs.
    """
    parts: list[str] = []
    if error:
        parts.append(f"not scored: {error}")
    found_text = False
    if isinstance(details, Mapping):
        reasons = details.get("reasons")
        if isinstance(reasons, list | tuple):
            texts = [r.strip() for r in reasons if isinstance(r, str) and r.strip()]
            if texts:
                found_text = True
                shown = "; ".join(texts[:MAX_REASONS])
                more = len(texts) - MAX_REASONS
                parts.append(shown + (f" (+{more} more)" if more > 0 else ""))
        for key in _TEXT_KEYS:
            text = details.get(key)
            if not found_text and isinstance(text, str) and text.strip():
                parts.append(text.strip())
                found_text = True
    counts = f"{_count(predicted_count)} predicted vs {_count(expected_count)} expected tool calls"
    parts.append(counts if score is None else f"score {score:.3g}: {counts}")
    if isinstance(details, Mapping) and not found_text:
        extras = _detail_summary(details)
        if extras:
            parts.append(extras)
    text = "; ".join(parts)
    if len(text) > EXPLANATION_MAX_CHARS:
        text = text[: EXPLANATION_MAX_CHARS - 1] + "…"
    return text


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _detail_summary(details: Mapping[str, Any]) -> str:
    """Scalar details (and lengths of list details) as ``key=value``, in the scorer's order."""
    items: list[str] = []
    for key, value in details.items():
        if key in _TEXT_KEYS or key in ("predicted_count", "expected_count", "reasons"):
            continue
        if isinstance(value, bool | int | float | str) and len(str(value)) <= 60:
            items.append(f"{key}={value}")
        elif isinstance(value, list | tuple) and value:
            items.append(f"{key}: {len(value)}")
    return ", ".join(items)


def evaluation_attributes(
    *,
    evaluation_id: int,
    metric: str,
    metric_type: str,
    score: float | None,
    error: str | None,
    details: Any,
    threshold: float,
    conversation_id: str,
    revision: int,
    expectation_id: str | None,
    expectation_version: int | None,
    predicted_count: int | None,
    expected_count: int | None,
) -> dict[str, Any]:
    """The attributes of one evaluation, identical on its span and its log record."""
    attrs: dict[str, Any] = {
        ATTR_EVALUATION_NAME: metric,
        ATTR_SCORE_LABEL: pass_label(score, threshold, details),
        ATTR_EXPLANATION: explanation(score, error, details, predicted_count, expected_count),
        ATTR_MARKER: True,
        ATTR_EVALUATION_ID: evaluation_id,
        ATTR_METRIC_TYPE: metric_type,
        ATTR_CONVERSATION_ID: conversation_id,
        ATTR_REVISION: revision,
        ATTR_THRESHOLD: threshold,
    }
    if score is not None and not math.isnan(score):
        attrs[ATTR_SCORE_VALUE] = float(score)
    if error:
        attrs[ATTR_ERROR] = error[:EXPLANATION_MAX_CHARS]
    warning = details.get("warning") if isinstance(details, Mapping) else None
    if isinstance(warning, str) and warning:
        attrs[ATTR_WARNING] = warning[:EXPLANATION_MAX_CHARS]
    if expectation_id is not None:
        attrs[ATTR_EXPECTATION_ID] = expectation_id
    if expectation_version is not None:
        attrs[ATTR_EXPECTATION_VERSION] = expectation_version
    if predicted_count is not None:
        attrs[ATTR_PREDICTED_COUNT] = predicted_count
    if expected_count is not None:
        attrs[ATTR_EXPECTED_COUNT] = expected_count
    return attrs


def metric_config_hash(metric_type: str, options: Any) -> str:
    """A stable short hash of one metric instance's type and normalised options."""
    blob = json.dumps([metric_type, options], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def provenance_attributes(
    *, metric_type: str, metric_config: Any, expectation_id: str | None, version: int | None
) -> dict[str, Any]:
    """Which evaluator (toolscore, its version, the metric and its configuration) and which
    reference (the expectation and its version) produced an evaluation."""
    from toolscore import __version__

    attrs: dict[str, Any] = {
        ATTR_EVALUATOR_ID: f"toolscore.{metric_type}",
        ATTR_EVALUATOR_VERSION: __version__,
        ATTR_EVALUATOR_TYPE: EVALUATOR_TYPE,
        ATTR_METRIC_CONFIG_HASH: metric_config_hash(metric_type, metric_config),
    }
    if expectation_id is not None:
        attrs[ATTR_REFERENCE_SET_ID] = expectation_id
    if version is not None:
        attrs[ATTR_REFERENCE_SET_VERSION] = str(version)
    return attrs


def span_name(metric: str) -> str:
    """Evaluation spans are named for the evaluation, like the GenAI ``{operation} {name}`` form."""
    return f"evaluation {metric}"


def is_toolscore_evaluation(span: SpanRecord) -> bool:
    """True for a span toolscore emitted itself (looped back through a Collector): ignore it.

    Either mark suffices, so a Collector that rewrites the resource (or the scope) still lets us
    recognise our own spans.
    """
    if span.attributes.get(ATTR_MARKER) is True:
        return True
    return (
        span.scope_name == TOOLSCORE_SCOPE_NAME
        and span.resource_attributes.get("service.name") == TOOLSCORE_SERVICE_NAME
    )


def is_toolscore_evaluation_log(record: LogRecordData) -> bool:
    """True for a ``gen_ai.evaluation.result`` log record toolscore emitted itself."""
    if record.attributes.get(ATTR_MARKER) is True:
        return True
    return (
        record.scope_name == TOOLSCORE_SCOPE_NAME
        and record.resource_attributes.get("service.name") == TOOLSCORE_SERVICE_NAME
    )


def without_toolscore_evaluations(
    spans: Sequence[SpanRecord], logs: Sequence[LogRecordData]
) -> tuple[Sequence[SpanRecord], Sequence[LogRecordData]]:
    """``spans`` and ``logs`` less toolscore's own evaluations (unchanged objects when none)."""
    if any(is_toolscore_evaluation(s) for s in spans):
        spans = [s for s in spans if not is_toolscore_evaluation(s)]
    if any(is_toolscore_evaluation_log(r) for r in logs):
        logs = [r for r in logs if not is_toolscore_evaluation_log(r)]
    return spans, logs


def details_json(details: Any) -> str:
    """Details as compact JSON (for exports and reports), never raising."""
    try:
        return json.dumps(details, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return json.dumps(str(details))
