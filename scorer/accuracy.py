"""ToolCallAccuracy: Ragas 0.4.3 by default, extended by explicit order/length/comparator options.

The computation mirrors ``ragas.metrics.ToolCallAccuracy._multi_turn_ascore`` step by step
(same summation order, same divisions) so default scores are bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolscore.scorer.arguments import (
    ArgumentPolicy,
    arg_score_detailed,
    exact_arg_score,
    exact_arg_score_detailed,
)
from toolscore.scorer.duplicates import collapse_repeats, repeats_reason
from toolscore.scorer.explain import (
    NOT_ALIGNED,
    coverage_reason,
    empty_reason,
    groups_flattened_reason,
    identical_explanation,
    pair_reason,
    unexpected_reason,
    unmatched_reason,
)
from toolscore.scorer.losses import gate_kind, pair_losses, unpaired_losses
from toolscore.scorer.model import Reference, ToolCall
from toolscore.scorer.pairing import (
    Pairing,
    covering,
    grouped,
    in_order,
    in_order_reason,
    optimal,
    sort_key,
    sorted_indices,
    sorted_pairs,
    subsequence,
)

ORDERS = ("strict", "flexible", "unordered", "subsequence", "grouped", "superset", "subset")
#: Orders for which different numbers of calls are the point, not a mismatch.
_EXTRAS_ALLOWED = ("subsequence", "superset")  # predicted calls beyond the reference
_MISSING_ALLOWED = ("subset",)  # reference calls never made
_COUNTS_FREE = ("subsequence", "superset", "subset")  # length_mismatch does not apply
LENGTH_POLICIES = ("zero", "prefix")


def is_flat(reference: Reference) -> bool:
    """True when the reference has no groups (every item is a call)."""
    for item in reference:
        if type(item) is not ToolCall and not isinstance(item, ToolCall):
            return False
    return True


def flat_calls(reference: Reference) -> Sequence[ToolCall]:
    """The reference calls in order, groups expanded."""
    if is_flat(reference):
        return reference  # type: ignore[return-value]
    return flatten(reference)[0]


def flatten(reference: Reference) -> tuple[list[ToolCall], list[list[int]], bool]:
    """Reference calls in order, the indices of each group, and whether any group was given."""
    calls: list[ToolCall] = []
    groups: list[list[int]] = []
    has_groups = False
    for item in reference:
        if isinstance(item, ToolCall):
            groups.append([len(calls)])
            calls.append(item)
        else:
            has_groups = True
            groups.append(list(range(len(calls), len(calls) + len(item))))
            calls.extend(item)
    return calls, groups, has_groups


def ragas_accuracy(pred: Sequence[ToolCall], ref: Sequence[ToolCall], strict: bool) -> float:
    """The default metric's value alone: Ragas's algorithm with the exact comparator."""
    if pred is ref:  # the very calls expected (see parse.read_calls)
        return 1.0
    if not pred:
        return 1.0 if not ref else 0.0
    if not ref or len(pred) != len(ref):
        return 0.0
    if not strict:
        pred = sorted(pred, key=sort_key)
        ref = sorted(ref, key=sort_key)
    score = 0.0
    for r, p in zip(ref, pred, strict=True):
        if r.name != p.name:  # the sequence gate (sorted by name first when flexible)
            return 0.0
        score += exact_arg_score(p.args, r.args)
    return score / len(ref)


@dataclass(frozen=True, slots=True)
class ToolCallAccuracy:
    order: str = "strict"
    length_mismatch: str = "zero"
    arguments: ArgumentPolicy = field(default_factory=ArgumentPolicy)
    duplicates: str = "keep"  # or "collapse": consecutive identical calls count once

    #: Ragas's own configuration (strict/flexible, zero, exact): the specialised fast paths.
    is_ragas_default: bool = field(init=False, repr=False, compare=False)

    type: ClassVar[str] = "tool_call_accuracy"

    def __post_init__(self) -> None:
        default = (
            self.order in ("strict", "flexible")
            and self.length_mismatch == "zero"
            and self.arguments.is_exact
            and self.duplicates == "keep"
        )
        object.__setattr__(self, "is_ragas_default", default)

    def value(self, predicted: Sequence[ToolCall], reference: Reference) -> float:
        if self.duplicates == "collapse":
            predicted = collapse_repeats(predicted)[0]
        if self.is_ragas_default and is_flat(reference):
            return ragas_accuracy(predicted, reference, self.order == "strict")  # type: ignore[arg-type]
        return self.evaluate(predicted, reference)[0]

    def evaluate(
        self, predicted: Sequence[ToolCall], reference: Reference
    ) -> tuple[float, dict[str, Any]]:
        """The score and its explanation."""
        if self.duplicates == "collapse":
            return self._evaluate_collapsed(predicted, reference)
        if self.is_ragas_default and predicted and reference and is_flat(reference):
            return self._evaluate_default(predicted, reference)  # type: ignore[arg-type]
        return self._evaluate_general(predicted, reference)

    def _evaluate_collapsed(
        self, predicted: Sequence[ToolCall], reference: Reference
    ) -> tuple[float, dict[str, Any]]:
        kept, dropped = collapse_repeats(predicted)
        value, details = self._evaluate_general(kept, reference)
        if dropped:
            details["repeats_collapsed"] = dropped
            details["reasons"].insert(0, repeats_reason(predicted, dropped))
        return value, details

    def _evaluate_default(
        self, predicted: Sequence[ToolCall], ref: Sequence[ToolCall]
    ) -> tuple[float, dict[str, Any]]:
        """:meth:`_evaluate_general` specialised to Ragas's defaults (same result, less work)."""
        n_p, n_r = len(predicted), len(ref)
        strict = self.order == "strict"  # else flexible: paired in name order
        r_order: Sequence[int] = range(n_r) if strict else sorted_indices(ref)
        if predicted is ref:  # the very calls expected (see parse.read_calls)
            return 1.0, identical_explanation(ref, r_order)
        p_order: Sequence[int] = range(n_p) if strict else sorted_indices(predicted)
        score = 0.0
        share = 1.0 / n_r
        aligned = n_p == n_r
        pairs: list[dict[str, Any]] = []
        reasons: list[str] = []
        losses: list[dict[str, Any]] = []
        for r, p in zip(r_order, p_order, strict=False):
            expected, got = ref[r], predicted[p]
            if expected.name != got.name:
                aligned = False
                continue
            # exact_arg_score_detailed, inlined: this loop is most of `toolscore score`'s work.
            g_args, e_args = got.args, expected.args
            per_arg: dict[str, float] = {}
            if e_args:
                total = 0.0
                for key, value in e_args.items():
                    if key in g_args and str(g_args[key]) == str(value):
                        per_arg[key] = 1.0
                        total += 1.0
                    else:
                        per_arg[key] = 0.0
                one = total / len(e_args)
            else:
                one = 0.0 if g_args else 1.0
            score += one
            pair = {"expected": r, "predicted": p, "name": expected.name, "score": one}
            pair["args"] = per_arg
            pairs.append(pair)
            if one < 1.0:
                lost = [k for k, s in per_arg.items() if s < 1.0]
                reasons.append(pair_reason(expected.name, e_args, g_args, lost))
                pair_losses(losses, r, p, expected.name, per_arg, g_args, share)
        if aligned:
            score /= n_r
        else:
            score = 0.0
            reasons.insert(0, self._gate_reason(predicted, ref))
        details: dict[str, Any] = {"predicted_count": n_p, "expected_count": n_r}
        details["aligned"] = aligned
        if len(pairs) != n_r or len(pairs) != n_p:
            return score, self._unpaired(details, predicted, ref, pairs, reasons, losses)
        details.update(
            pairs=pairs,
            unmatched_expected=[],
            unmatched_predicted=[],
            reasons=reasons,
            losses=losses,
        )
        return min(1.0, max(0.0, score)), details

    def _gate_reason(self, predicted: Sequence[ToolCall], ref: Sequence[ToolCall]) -> str:
        if self.order == "strict":  # (in_order's reason, without building its pairs)
            return in_order_reason(predicted, ref, False) or NOT_ALIGNED
        return self._pair(predicted, ref, (), None).reason or NOT_ALIGNED

    def _evaluate_general(
        self, predicted: Sequence[ToolCall], reference: Reference
    ) -> tuple[float, dict[str, Any]]:
        ref, groups, has_groups = flatten(reference)
        n_p, n_r = len(predicted), len(ref)
        details: dict[str, Any] = {"predicted_count": n_p, "expected_count": n_r}
        reasons: list[str] = []
        if has_groups and self.order != "grouped":
            reasons.append(groups_flattened_reason(self.order))
        if not n_p or not n_r:
            return self._evaluate_empty(predicted, ref, details, reasons)
        pair_detail = self._pair_scorer(predicted, ref)
        pairing = self._pair(predicted, ref, groups, lambda r, p: pair_detail(r, p)[0])
        # each counted call's worth: 1 / R (1 / P for subset), times the prefix coverage
        share = 1.0 / (n_p if self.order in _MISSING_ALLOWED else n_r)
        compared = min(n_p, n_r)
        covering = self.order in ("superset", "subset")
        coverage = compared / n_r if compared < n_r and not covering else 1.0
        if coverage < 1.0 and self.length_mismatch == "prefix":  # (zero: the gate fails)
            share *= coverage
        score = 0.0
        pairs: list[dict[str, Any]] = []
        losses: list[dict[str, Any]] = []
        for r, p in pairing.pairs:
            expected, got = ref[r], predicted[p]
            if expected.name != got.name:
                continue
            one, per_arg = pair_detail(r, p)
            score += one
            pair = {"expected": r, "predicted": p, "name": expected.name, "score": one}
            pair["args"] = per_arg
            pairs.append(pair)
            if one < 1.0:
                lost = [k for k, s in per_arg.items() if s < 1.0]
                reasons.append(pair_reason(expected.name, expected.args, got.args, lost))
                pair_losses(losses, r, p, expected.name, per_arg, got.args, share)
        score /= n_p if self.order in _MISSING_ALLOWED else n_r
        if coverage < 1.0:
            score *= coverage
            if pairing.aligned:
                details["coverage"] = coverage
                reasons.append(coverage_reason(compared, n_r))
        if not pairing.aligned:
            score = 0.0
            reasons.insert(0, pairing.reason or NOT_ALIGNED)
        details["aligned"] = pairing.aligned
        score = min(1.0, max(0.0, score))
        return score, self._unpaired(details, predicted, ref, pairs, reasons, losses, score)

    def _pair_scorer(
        self, predicted: Sequence[ToolCall], ref: Sequence[ToolCall]
    ) -> Callable[[int, int], tuple[float, dict[str, float]]]:
        """The argument score and per-argument scores of a pair, each pair computed once."""
        cache: dict[tuple[int, int], tuple[float, dict[str, float]]] = {}
        policy = self.arguments
        exact = policy.is_exact

        def pair_detail(r: int, p: int) -> tuple[float, dict[str, float]]:
            found = cache.get((r, p))
            if found is None:
                found = cache[(r, p)] = (
                    exact_arg_score_detailed(predicted[p], ref[r])
                    if exact
                    else arg_score_detailed(predicted[p], ref[r], policy)
                )
            return found

        return pair_detail

    def _unpaired(
        self,
        details: dict[str, Any],
        predicted: Sequence[ToolCall],
        ref: Sequence[ToolCall],
        pairs: list[dict[str, Any]],
        reasons: list[str],
        losses: list[dict[str, Any]],
        score: float = 0.0,
    ) -> dict[str, Any]:
        """Complete ``details`` with the calls left without a partner: their reasons and labels."""
        n_p, n_r = len(predicted), len(ref)
        matched_r = {d["expected"] for d in pairs}
        matched_p = {d["predicted"] for d in pairs}
        unmatched_expected = [r for r in range(n_r) if r not in matched_r]
        unmatched_predicted = [p for p in range(n_p) if p not in matched_p]
        missing = self.order if self.order in _MISSING_ALLOWED else ""
        extra = self.order if self.order in _EXTRAS_ALLOWED else ""
        reasons += [unmatched_reason(ref[r].name, ref[r].args, missing) for r in unmatched_expected]
        reasons += [
            unexpected_reason(predicted[p].name, predicted[p].args, extra)
            for p in unmatched_predicted
        ]
        gate = None
        if not details["aligned"]:
            length_failed = (
                self.length_mismatch == "zero" and n_p != n_r and self.order not in _COUNTS_FREE
            )
            gate = gate_kind(
                self.order, length_failed, [c.name for c in ref], [c.name for c in predicted]
            )
        unpaired_losses(
            losses,
            score,
            [(r, ref[r].name) for r in unmatched_expected],
            [(p, predicted[p].name) for p in unmatched_predicted],
            gate=gate,
            free_missing=bool(missing),
            free_extra=bool(extra),
        )
        details.update(
            pairs=pairs,
            unmatched_expected=unmatched_expected,
            unmatched_predicted=unmatched_predicted,
            reasons=reasons,
            losses=losses,
        )
        return details

    def _evaluate_empty(
        self,
        predicted: Sequence[ToolCall],
        ref: Sequence[ToolCall],
        details: dict[str, Any],
        reasons: list[str],
    ) -> tuple[float, dict[str, Any]]:
        """One side (or both) has no calls."""
        n_p, n_r = len(predicted), len(ref)
        allowed = self.order in (_EXTRAS_ALLOWED if n_p else _MISSING_ALLOWED)
        value = 1.0 if allowed or (not n_p and not n_r) else 0.0
        if n_p or n_r:
            reasons.append(empty_reason(n_p, n_r, self.order, allowed))
        losses: list[dict[str, Any]] = []
        unpaired_losses(
            losses,
            value,
            [(r, c.name) for r, c in enumerate(ref)],
            [(p, c.name) for p, c in enumerate(predicted)],
            free_missing=allowed,
            free_extra=allowed,
        )
        details.update(
            aligned=value == 1.0,
            pairs=[],
            unmatched_expected=list(range(n_r)),
            unmatched_predicted=list(range(n_p)),
            reasons=reasons,
            losses=losses,
        )
        return value, details

    def _pair(
        self,
        predicted: Sequence[ToolCall],
        ref: Sequence[ToolCall],
        groups: Sequence[Sequence[int]],
        pair_score: Any,
    ) -> Pairing:
        prefix = self.length_mismatch == "prefix"
        if self.order == "strict":
            return in_order(predicted, ref, prefix)
        if self.order == "flexible":
            return sorted_pairs(predicted, ref, prefix)
        if self.order == "unordered":
            return optimal(predicted, ref, prefix, pair_score)
        if self.order == "subsequence":
            return subsequence(predicted, ref, prefix, pair_score)
        if self.order == "superset":
            return covering(predicted, ref, pair_score, of="reference")
        if self.order == "subset":
            return covering(predicted, ref, pair_score, of="predicted")
        return grouped(predicted, groups, ref, prefix, pair_score)

    def options(self) -> dict[str, Any]:
        return {"order": self.order, "length_mismatch": self.length_mismatch}
