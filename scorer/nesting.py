"""How deep tool arguments may nest: the one bound on every recursive walk in the scorer.

Ragas walks arguments recursively (``_make_hashable``, ``str()``) and dies with a
``RecursionError`` somewhere between 500 and 1,000 levels, depending on the caller's stack. The
scorer instead refuses arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` with a
:class:`NestingError` (a :class:`~toolscore.scorer.model.SampleError`): the reader checks it
once per call, and every recursive function below it carries a depth counter as a second guard
(values built by hand, JSON decoded inside a comparator). Real arguments nest a few levels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolscore.scorer.model import SampleError

#: Levels of objects/arrays a call's arguments may nest, the ``args`` object itself being level 1.
MAX_ARGUMENT_DEPTH = 100


class NestingError(SampleError):
    """A value nested deeper than :data:`MAX_ARGUMENT_DEPTH` levels."""


#: The problem, as the reader reports it after the offending path.
DEPTH_PROBLEM = (
    f"nested deeper than {MAX_ARGUMENT_DEPTH} levels of objects/arrays (refused rather than "
    "walked: real arguments nest a few levels)"
)


def too_deep(what: str) -> NestingError:
    return NestingError(f"{what}: {DEPTH_PROBLEM}")


def depth_exceeds(value: Any, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether ``value`` nests more than ``limit`` levels of dicts/lists/tuples (iterative)."""
    if not isinstance(value, _CONTAINERS):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
    return False


def has_containers(args: Any) -> bool:
    """Cheap test before :func:`depth_exceeds`: flat arguments (the usual case) cannot be deep."""
    for v in args.values():  # noqa: SIM110 (a plain loop: no generator on the parse path)
        if type(v) in CONTAINER_TYPES:
            return True
    return False


def check_calls(calls: Iterable[Any], what: str) -> None:
    """Raise :class:`NestingError` if any call's ``args`` nest too deep (calls built by hand
    rather than read: the reader has checked those already)."""
    for i, call in enumerate(calls):
        args = call.args if isinstance(call.args, dict) else dict(call.args)
        if has_containers(args) and depth_exceeds(args):
            raise too_deep(f"{what}[{i}].args")


_CONTAINERS = (dict, list, tuple)
CONTAINER_TYPES = frozenset(_CONTAINERS)
