"""``run``: score every sample of a source into an output, forking for big regular files."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import IO

from toolscore.collector.offline.forking import forked
from toolscore.collector.offline.job import Block, Job, scored
from toolscore.collector.offline.progress import Progress
from toolscore.collector.offline.reader import chunks, first_items, is_regular, segments

#: A regular file is read in blocks of whole lines of about this size (memory stays flat);
#: larger ones when forking, so that a fork (~1-3 ms) is paid once per ~20,000 samples.
SEGMENT_BYTES = 1 << 20
FORKED_SEGMENT_BYTES = 16 << 20
#: Below this many bytes of input per process, forking another does not pay: a fork and its
#: collection cost ~2-3 ms of CPU (1 MiB is ~1,400 of the benchmark's samples, ~20 ms of work),
#: and nothing is gained when the other core is busy. Bytes, not lines: counting lines before
#: the fork would cost ~0.4 ms per MiB on the critical path.
MIN_BYTES_PER_PROCESS = 1 << 20


def run(
    job: Job,
    source: IO[bytes],
    out: IO[bytes],
    *,
    progress: Progress | None = None,
    jobs: int = 1,
) -> int:
    """Score every sample of ``source`` into ``out``; 1 if any failed, else 0."""
    gc.disable()  # rows are acyclic and short-lived; the cyclic collector only costs time here
    failed = False
    try:
        for data, block_failed, count, size in blocks(job, source, jobs, out):
            out.write(data)
            failed = failed or block_failed
            if progress is not None:
                progress.advance(count, size)
    finally:
        gc.enable()
    out.flush()
    return 1 if failed else 0


def blocks(job: Job, source: IO[bytes], jobs: int, out: IO[bytes]) -> Iterator[Block]:
    head, rest = first_items(source, job.loads)
    if head:
        yield job.score_items(head)
    if rest is None:
        return
    number, lines = rest
    if lines is not source or not is_regular(source):
        # A pipe or terminal (lines scored as they come) or an already split document.
        for chunk in chunks(lines, number):
            yield job.score_chunk(chunk)
        return
    for start, data in segments(
        source, number, FORKED_SEGMENT_BYTES if jobs > 1 else SEGMENT_BYTES
    ):
        processes = min(jobs, len(data) // MIN_BYTES_PER_PROCESS)
        if processes > 1 and hasattr(os, "fork"):
            yield from forked(job, start, data, processes, out)
        else:
            yield from scored(job, start, data)
