"""Bounded IN lists: a statement over many ids runs once per chunk of them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

IN_LIST = 500  # ids per IN (...) list or bound array


def chunks(items: Iterable[T], size: int = IN_LIST) -> Iterator[list[T]]:
    """Consecutive lists of up to ``size`` items (lists: PostgreSQL binds one as an array)."""
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch
