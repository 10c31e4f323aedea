"""Scoring a block of input lines into output bytes (:class:`Job`), shared by every process."""

from __future__ import annotations

import gc
import io
from collections.abc import Iterable, Iterator
from typing import TypeAlias

from toolscore.collector.offline.reader import Chunk, Item, bad_line, document_items
from toolscore.scorer.config import ScoringConfig, default_config
from toolscore.scorer.rows import error_row, score_row
from toolscore.storage.plumbing.jsoncodec import LineCodec

Block: TypeAlias = tuple[bytes, bool, int, int]  # output, any failure, samples, input bytes

#: Lines of a regular file scored at a time, in bytes: below glibc's mmap threshold (128 KiB),
#: so that each chunk's buffers reuse the last one's memory instead of faulting in new pages.
CHUNK_BYTES = 64 << 10


class Job:
    """What scoring a chunk of lines needs (forked processes inherit it).

    ``config`` ``None`` means the default instances.
    """

    def __init__(self, config: ScoringConfig | None, details: bool) -> None:
        self.config = default_config() if config is None else config
        self.details = details
        self.codec = LineCodec()
        self.loads, self.dumps = self.codec.loads, self.codec.dumps
        self.lines = 0  # scored since the last sweep of the cycle collector

    def score_items(self, items: Iterable[Item]) -> Block:
        out: list[bytes] = []
        failed = False
        size = 0
        for where, obj, problem, consumed in items:
            if problem is None:
                row, ok = score_row(self.config, obj, where=where, details=self.details)
            else:
                row, ok = error_row(self.config, f"{where}: {problem}"), False
            failed = failed or not ok
            out.append(self.dumps(row))
            size += consumed
        return b"".join(out), failed, len(out), size

    def score_chunk(self, chunk: Chunk) -> Block:
        start, lines = chunk
        codec = self.codec
        # One long-number test for the whole chunk; lines then go straight to orjson.
        return self.score_lines(start, lines, codec.has_long_numbers(b"".join(lines)))

    def score_lines(self, start: int, lines: list[bytes], long_numbers: bool) -> Block:
        """The block of ``lines``, the first being line ``start``.

        ``long_numbers`` false says no line holds a run of 19 digits (see ``LineCodec``), so that
        lines go straight to orjson. The hot loop of the command: a well-formed sample goes
        through orjson, :func:`~toolscore.scorer.rows.score_row` and orjson with no other
        per-line work; blank lines, what only ``json`` reads, bad JSON and ``{"samples": [...]}``
        wrappers are sorted out only when a step fails.
        """
        self.lines += len(lines)
        if self.lines >= 50_000:  # the collector is off during runs; sweep stray cycles
            self.lines = 0
            gc.collect()
        codec = self.codec
        loads = codec.loads if long_numbers else codec.orjson_loads
        dumps, newline = codec.orjson_dumps, codec.newline
        config, details = self.config, self.details
        out: list[bytes] = []
        failed = False
        wrapped = 0  # samples of {"samples": [...]} lines beyond one per line
        number = start - 1
        for raw in lines:
            number += 1
            try:
                obj = loads(raw)
            except ValueError:
                if raw.isspace() or not raw:
                    continue  # a blank line
                try:  # NaN, Infinity, lone surrogates: json reads them, as Ragas users' json
                    obj = codec.json_loads(raw)
                except ValueError as exc:
                    out.append(self.score_items([bad_line(number, exc, 0)])[0])
                    failed = True
                    continue
            if type(obj) is dict and "samples" in obj and "user_input" not in obj:
                block = self.score_items(document_items(obj, number, 0))
                out.append(block[0])
                failed = failed or block[1]
                wrapped += block[2] - 1
                continue
            row, ok = score_row(config, obj, where=f"line {number}", details=details)
            failed = failed or not ok
            try:
                out.append(dumps(row, None, newline))
            except TypeError:  # e.g. an integer id beyond 64 bits
                out.append(self.dumps(row))
        return b"".join(out), failed, len(out) + wrapped, sum(map(len, lines))


def scored(job: Job, start: int, data: bytes, begin: int = 0, end: int = -1) -> Iterator[Block]:
    """The blocks of the whole lines ``data[begin:end]``, whose first line is line ``start``.

    Chunks of about ``CHUNK_BYTES``: their memory is reused from one chunk to the next, and
    ``data`` is not copied (a forked process reads its share of its parent's block in place).
    """
    codec = job.codec
    if end < 0:
        end = len(data)
    stream = io.BytesIO(data)  # shares data's buffer
    stream.seek(begin)
    while begin < end:
        lines = stream.readlines(CHUNK_BYTES)  # split on b"\n" only, as files are
        stop = stream.tell()
        while stop > end:  # past the share's last line (shares end where lines end)
            stop -= len(lines.pop())
        # One long-number test for the chunk; its lines then go straight to orjson.
        long = codec.has_long_numbers(data[begin:stop])
        yield job.score_lines(start, lines, long)
        start += len(lines)
        begin = stop
