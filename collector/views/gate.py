"""CI gating on scored rows: means per metric instance, ``--fail-under`` and JUnit XML.

Fed the output rows of ``toolscore score`` (one dict per sample, in order), it keeps per
instance the count, sum and passes of the scored samples, and, when a JUnit report is asked
for, one test case per sample and instance. A sample a metric could not score counts as an
error in the report and is left out of the mean. ``--fail-under`` and ``--pass-threshold``
values are read by ``configuration.metric_levels``, the parser ``serve --pass-threshold`` uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any


def gate_from_flags(
    names: Sequence[str], pass_threshold: Sequence[str], fail_under: Sequence[str], junit: bool
) -> ScoreGate:
    """The gate ``--pass-threshold``, ``--fail-under`` and ``--junit`` ask for (``score`` and
    ``evaluate``); a bad value raises ``ConfigError`` naming the flag."""
    from toolscore.collector.configuration import metric_levels

    return ScoreGate(
        names,
        pass_thresholds=metric_levels(pass_threshold, "--pass-threshold", names),
        fail_under=metric_levels(fail_under, "--fail-under", names),
        keep_cases=junit,
    )


def conclude(gate: ScoreGate, junit: str | None, suite: str, err: IO[str]) -> None:
    """The verdict lines on ``err`` (when a gate or a report was asked for) and the JUnit
    file; a file that cannot be written is a usage error."""
    if gate.fail_under or junit is not None:
        for line in gate.summary_lines():
            print(line, file=err)
    if junit is None:
        return
    try:
        with open(junit, "wb") as stream:
            gate.write_junit(stream, suite=suite)
    except OSError as exc:
        from toolscore.collector.errors import UsageError

        raise UsageError(f"cannot write {junit}: {exc.strerror or exc}") from None


@dataclass(slots=True)
class _Tally:
    count: int = 0
    total: float = 0.0
    passed: int = 0
    errors: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(frozen=True, slots=True)
class _Case:
    sample: str
    metric: str
    score: float | None
    passed: bool
    message: str


@dataclass(slots=True)
class ScoreGate:
    """Accumulates rows; ``verdicts()`` and ``write_junit()`` report on them."""

    instances: Sequence[str]
    pass_thresholds: Mapping[str, float] = field(default_factory=dict)
    fail_under: Mapping[str, float] = field(default_factory=dict)
    keep_cases: bool = False
    _tallies: dict[str, _Tally] = field(init=False)
    _cases: list[_Case] = field(init=False, default_factory=list)
    _rows: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._tallies = {name: _Tally() for name in self.instances}

    def threshold(self, metric: str) -> float:
        return self.pass_thresholds.get(metric, 1.0)

    def add(self, row: Mapping[str, Any]) -> None:
        self._rows += 1
        sample = str(row.get("id") if row.get("id") is not None else f"sample {self._rows}")
        for metric, tally in self._tallies.items():
            score = row.get(metric)
            passed = isinstance(score, int | float) and score >= self.threshold(metric)
            if isinstance(score, int | float):
                tally.count += 1
                tally.total += score
                tally.passed += passed
            else:
                tally.errors += 1
            if self.keep_cases:
                self._cases.append(_Case(sample, metric, score, passed, _why(row, metric)))

    def failed(self) -> bool:
        """True when a ``--fail-under`` metric's mean is below its level (or nothing scored)."""
        for metric, level in self.fail_under.items():
            mean = self._tallies[metric].mean
            if mean is None or mean < level:
                return True
        return False

    def summary_lines(self) -> list[str]:
        """One line per metric instance: mean, pass rate, count, and the gate's verdict."""
        lines = []
        for metric, tally in self._tallies.items():
            mean = "n/a" if tally.mean is None else f"{tally.mean:.4f}"
            rate = f"{tally.passed / tally.count:.1%}" if tally.count else "n/a"
            text = (
                f"{metric}: mean {mean}, pass rate {rate} (>= {self.threshold(metric):g}), "
                f"{tally.count} scored, {tally.errors} not scored"
            )
            if metric in self.fail_under:
                level = self.fail_under[metric]
                ok = tally.mean is not None and tally.mean >= level
                text += f": {'PASS' if ok else 'FAIL'} (fail-under {level:g})"
            lines.append(text)
        return lines

    def write_junit(self, stream: IO[bytes], suite: str = "toolscore score") -> None:
        """JUnit XML: a test case per sample and metric instance, failing below threshold."""
        import xml.etree.ElementTree as ET

        failures = sum(1 for c in self._cases if c.score is not None and not c.passed)
        errors = sum(1 for c in self._cases if c.score is None)
        root = ET.Element("testsuites")
        counts = {"tests": len(self._cases), "failures": failures, "errors": errors}
        node = ET.SubElement(
            root, "testsuite", {"name": suite, **{k: str(v) for k, v in counts.items()}}
        )
        for case in self._cases:
            element = ET.SubElement(node, "testcase", classname=case.metric, name=case.sample)
            if case.score is None:
                ET.SubElement(element, "error", message=case.message).text = case.message
            elif not case.passed:
                text = f"{case.metric} = {case.score:g} < {self.threshold(case.metric):g}: "
                failure = ET.SubElement(element, "failure", message=text + case.message)
                failure.text = text + case.message
        ET.ElementTree(root).write(stream, encoding="utf-8", xml_declaration=True)


def _why(row: Mapping[str, Any], metric: str) -> str:
    if "error" in row:
        return str(row["error"])
    errors = row.get("errors") or {}
    if metric in errors:
        return str(errors[metric])
    if "details" not in row:
        return "(no explanation: scored with --no-details)"
    details = row["details"].get(metric) or {}
    reasons = details.get("reasons") or []
    return "; ".join(str(r) for r in reasons) or "as expected"


class GatedOutput:
    """An output stream whose rows ``gate`` reads back as they are written."""

    def __init__(self, out: IO[bytes], gate: ScoreGate) -> None:
        from toolscore.storage.plumbing.jsoncodec import LineCodec

        self._out, self._gate, self._loads = out, gate, LineCodec().loads
        self._partial = b""

    def write(self, data: bytes) -> int:
        self._out.write(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line:
                self._gate.add(self._loads(line))
        return len(data)

    def flush(self) -> None:
        self._out.flush()
