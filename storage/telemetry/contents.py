"""Long span attribute strings stored once per day: pieces addressed by their content.

Model spans repeat the conversation so far: each one carries every earlier message again, as
a JSON array in one string (``gen_ai.input.messages``, framework message dumps), as one string
per message (flattened conventions), or both. A string of REF_AT characters or more is cut into
pieces after each ``}`` that ends an element of an array of objects (``},{``, ``}, {``,
``}]``: JSON, and Python's repr of dicts and lists, alike), small pieces merged forward until
PIECE_MIN characters; the text after the last cut (the closing brackets) is a piece of its own.
A longer history then shares every piece but the last few with the shorter one before it,
whatever the convention. Each piece is stored once per UTC day of the span's start
(``span_contents``: the day, the piece's hash, its zstd-compressed UTF-8); its hash is
HASH_CHARS characters (base64url of a 16-byte BLAKE2b of the UTF-8).

So that the list of a long history's hashes does not itself grow with the square of the turns,
a list of more than GROUP_AT hashes is cut into groups, after each hash that starts with one of
GROUP_ENDS (one in eight: where depends on the hashes only, so a longer history shares all its
groups but the last), each group stored as a piece whose text is its hashes; again until at
most GROUP_AT are left. The attribute holds ``{"$zrefs": "<day>:<levels>:<hash><hash>..."}``:
the day number is Unix ns // DAY_NS; levels 1: the hashes are the string's pieces, 2: groups
of them, and so on. Reading concatenates the pieces again, so the string read back is exactly
the one received.

A span's resource attributes (repeated by every span of a process) are kept the same way, their
JSON as one uncut piece (``row_encode``).

Keyed by day so that retention drops a day's pieces once no span of that day is left, without
searching JSON for references (storage/telemetry/content_store.py); a conversation crossing
midnight stores a piece at most twice.

Pure: no SQL.
"""

from __future__ import annotations

import re
import threading
from binascii import b2a_base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from hashlib import blake2b

from toolscore.storage.plumbing.zstd_codec import compressor, decompressor

REF_AT = 128  # strings at least this long (in characters) are stored as pieces
RESOURCE_REF_AT = 64  # a span's resource attributes whose JSON is this long: stored as a piece
PIECE_MIN = 256  # a piece is at least this long unless it ends its string
TAG = "$zrefs"
HASH_CHARS = 22
DAY_NS = 86_400 * 1_000_000_000
LEVEL = 3  # zstd level: pieces are compressed once, read many times
# the days before today whose stored pieces a writer trusts its memory of
# (KnownContents; content_store.SWEEP_MARGIN_DAYS keeps the sweep further back)
TRUST_DAYS = 1

GROUP_AT = 8
GROUP_ENDS = frozenset("ABCDEFGH")

_CUT = re.compile(r"\}(?=\s*(?:,\s*\{|\]))")
_REF = re.compile(r'"\$zrefs":\s*"(\d+):(\d+):([A-Za-z0-9_-]*)"')
_ENCODED = re.compile(r"(\d+):(\d+):([A-Za-z0-9_-]*)")

Key = tuple[int, str]  # (day_ns, hash)
Reference = tuple[int, str, int]  # (day_ns, hash, levels): levels > 1 is a group of hashes


def pieces(text: str) -> list[str]:
    """``text`` cut as the module docstring says (their concatenation is ``text``)."""
    out: list[str] = []
    start = 0
    search = _CUT.search
    # the first cut point at least PIECE_MIN past the last cut ends a piece: search from
    # there rather than stepping through every `}` between
    while (match := search(text, start + PIECE_MIN - 1)) is not None:
        out.append(text[start : match.end()])
        start = match.end()
    last = start
    for match in _CUT.finditer(text, start):  # fewer than PIECE_MIN characters: a few
        last = match.end()
    if start < last:
        out.append(text[start:last])
    if last < len(text):
        out.append(text[last:])
    return out


def groups(hashes: list[str]) -> list[str]:
    """``hashes`` (each HASH_CHARS long) cut after each one starting with one of GROUP_ENDS."""
    out: list[str] = []
    start = 0
    for i, h in enumerate(hashes):
        if h[0] in GROUP_ENDS:
            out.append("".join(hashes[start : i + 1]))
            start = i + 1
    if start < len(hashes):
        out.append("".join(hashes[start:]))
    return out


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def piece_hash(data: bytes) -> str:
    digest = blake2b(data, digest_size=16).digest()
    # base64url without the module's wrappers (a call per piece)
    return b2a_base64(digest, newline=False)[:HASH_CHARS].translate(_URLSAFE).decode("ascii")


def day_of(ns: int) -> int:
    """The day start (Unix ns) a span starting at ``ns`` keeps its pieces under."""
    return ns - ns % DAY_NS


class KnownContents:
    """Pieces this writer stored in committed transactions, so that a later batch neither
    compresses nor inserts them again. Only pieces of today and the TRUST_DAYS before are
    trusted: older days may be swept by retention meanwhile. Bounded: the oldest half is
    forgotten when full."""

    def __init__(self, limit: int = 500_000) -> None:
        self._keys: dict[Key, None] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def trusted(self, key: Key, now_ns: int) -> bool:
        return key[0] >= day_of(now_ns) - TRUST_DAYS * DAY_NS and key in self._keys

    def remember(self, keys: Iterable[Key]) -> None:
        with self._lock:
            self._keys.update(dict.fromkeys(keys))
            if len(self._keys) > self._limit:
                for key in list(self._keys)[: len(self._keys) // 2]:
                    del self._keys[key]


class ContentBatch:
    """The pieces of one ingest batch: references for the rows, and the pieces to store."""

    def __init__(self, now_ns: int, known: KnownContents | None = None) -> None:
        self._now = now_ns
        self._known = known
        self._new: dict[Key, bytes] = {}  # piece -> its UTF-8, to compress and store
        self._keys: dict[Key, None] = {}  # every piece referenced
        self._refs: dict[tuple[int, str], dict[str, str]] = {}  # (day, text) -> reference
        self._referrers: dict[int, Callable[[str], dict[str, str]]] = {}

    def referrer(self, day_ns: int) -> Callable[[str], dict[str, str]]:
        """:meth:`ref` for ``day_ns`` as a one-argument function (one per day, not per span)."""
        found = self._referrers.get(day_ns)
        if found is None:
            ref = self.ref
            found = self._referrers[day_ns] = lambda text: ref(text, day_ns)
        return found

    def ref(self, text: str, day_ns: int, cut: bool = True) -> dict[str, str]:
        """``text``'s tagged reference, its pieces kept for storing under ``day_ns``; not
        ``cut``: one piece (a text that does not grow by repeating itself)."""
        found = self._refs.get((day_ns, text))
        if found is not None:
            return found
        parts = pieces(text) if cut else [text]
        hashes = [self._piece(piece.encode("utf-8"), day_ns) for piece in parts]
        levels = 1
        while len(hashes) > GROUP_AT:
            grouped = groups(hashes)
            if len(grouped) == len(hashes):
                break
            hashes = [self._piece(group.encode("ascii"), day_ns) for group in grouped]
            levels += 1
        ref = {TAG: f"{day_ns // DAY_NS}:{levels}:{''.join(hashes)}"}
        self._refs[(day_ns, text)] = ref
        return ref

    def _piece(self, data: bytes, day_ns: int) -> str:
        key = (day_ns, piece_hash(data))
        if key not in self._keys:
            self._keys[key] = None
            if self._known is None or not self._known.trusted(key, self._now):
                self._new[key] = data
        return key[1]

    def rows(self) -> list[tuple[int, str, bytes]]:
        """(day_ns, hash, compressed UTF-8) of the pieces to store, in key order (concurrent
        writers inserting the same pieces then lock them in one order: no deadlock)."""
        compress = compressor(LEVEL).compress
        return [(day, h, compress(self._new[(day, h)])) for day, h in sorted(self._new)]

    def keys(self) -> list[Key]:
        """Every piece the batch references (to remember once committed)."""
        return list(self._keys)


@dataclass(frozen=True, slots=True)
class StoredContents:
    """What ``store_telemetry`` inserts into ``span_contents`` beside the spans."""

    rows: tuple[tuple[int, str, bytes], ...] = ()  # ContentBatch.rows
    keys: tuple[Key, ...] = ()  # ContentBatch.keys


def references(json_texts: Iterable[str]) -> set[Reference]:
    """The pieces referenced in stored JSON texts (whatever their spacing)."""
    out: set[Reference] = set()
    for text in json_texts:
        if TAG not in text:
            continue
        for day, levels, hashes in _REF.findall(text):
            day_ns, level = int(day) * DAY_NS, int(levels)
            out.update((day_ns, h, level) for h in split(hashes))
    return out


def referred(encoded: str) -> list[Reference]:
    """The pieces a ``$zrefs`` value names (none when it is not one: it then fails to resolve)."""
    found = _ENCODED.fullmatch(encoded)
    if found is None:
        return []
    day, levels, hashes = found.groups()
    day_ns, level = int(day) * DAY_NS, int(levels)
    return [(day_ns, h, level) for h in split(hashes)]


def children(reference: Reference, texts: Mapping[Key, str]) -> list[Reference]:
    """What a group (levels > 1) refers to, from its stored text."""
    day, h, levels = reference
    return [(day, child, levels - 1) for child in split(texts[(day, h)])]


def split(hashes: str) -> list[str]:
    return [hashes[i : i + HASH_CHARS] for i in range(0, len(hashes), HASH_CHARS)]


def decompress(data: bytes) -> str:
    return decompressor().decompress(data).decode("utf-8")


def resolve(encoded: str, texts: Mapping[Key, str]) -> str:
    """The string a ``$zrefs`` value stands for, from the pieces' ``texts``."""
    day, levels, hashes = encoded.split(":")
    return _joined(int(day) * DAY_NS, int(levels), hashes, texts)


def resolved_chars(encoded: str, texts: Mapping[Key, str]) -> int:
    """The length of the string a ``$zrefs`` value stands for (without joining it)."""
    day, levels, hashes = encoded.split(":")
    return _length(int(day) * DAY_NS, int(levels), hashes, texts)


def _length(day_ns: int, levels: int, hashes: str, texts: Mapping[Key, str]) -> int:
    parts = [texts[(day_ns, h)] for h in split(hashes)]
    if levels == 1:
        return sum(map(len, parts))
    return sum(_length(day_ns, levels - 1, part, texts) for part in parts)


def _joined(day_ns: int, levels: int, hashes: str, texts: Mapping[Key, str]) -> str:
    parts = [texts[(day_ns, h)] for h in split(hashes)]
    if levels == 1:
        return "".join(parts)
    return "".join(_joined(day_ns, levels - 1, part, texts) for part in parts)
