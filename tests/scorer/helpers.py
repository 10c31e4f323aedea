"""Small builders shared by the scorer tests."""

from __future__ import annotations

from typing import Any

from toolscore.scorer import MetricInstance, Sample, Score, parse_config, parse_sample

Call = tuple[str, dict[str, Any]]


def call(name: str, **args: Any) -> Call:
    return (name, args)


def sample_dict(predicted: list[Call], reference: list[Any] | None) -> dict[str, Any]:
    """A Ragas MultiTurnSample JSON with all predicted calls in one ai message."""
    messages: list[dict[str, Any]] = [{"type": "human", "content": "please help"}]
    if predicted:
        messages.append(
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": n, "args": a} for n, a in predicted],
            }
        )
        messages += [{"type": "tool", "content": "ok"} for _ in predicted]
    messages.append({"type": "ai", "content": "done"})
    out: dict[str, Any] = {"user_input": messages}
    if reference is not None:
        out["reference_tool_calls"] = [_ref_item(item) for item in reference]
    return out


def _ref_item(item: Any) -> Any:
    if isinstance(item, list):
        return [_ref_item(x) for x in item]
    name, args = item
    return {"name": name, "args": args}


def instance(**options: Any) -> MetricInstance:
    options.setdefault("type", "tool_call_accuracy")
    return parse_config({"metrics": {"m": options}}).instances["m"]


def score(metric: MetricInstance, predicted: list[Call], reference: list[Any] | None) -> Score:
    sample: Sample = parse_sample(sample_dict(predicted, reference))
    return metric.score(sample.predicted_tool_calls, sample.reference_tool_calls)
