"""One block of lines shared among forked processes, their output written in the input's order."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from itertools import pairwise
from typing import IO, NoReturn

from toolscore.collector.offline.job import Block, Job, scored


def forked(job: Job, start: int, data: bytes, processes: int, out: IO[bytes]) -> Iterator[Block]:
    """Score whole lines ``data`` in ``processes`` processes, each a contiguous share, in order.

    This process scores the first share while forked children score the others: forking
    costs ~1 ms and shares the loaded modules and the configuration. A child scores its share
    into memory, waits for its turn, writes its output straight to ``out``'s file descriptor
    (through this process, over a pipe, when ``out`` has none: that costs ~2 ms per MB),
    reports how many rows it wrote and exits with 1 if any of its lines failed, else 0.
    """
    direct = _descriptor(out)
    cuts = _cuts(data, processes)
    children: list[tuple[int, int, int, int]] = []  # pid, report (read end), turn, input bytes
    try:
        for begin, end in pairwise(cuts[1:]):
            children.append(_spawn(job, start, data, begin, end, direct, children))
        yield from scored(job, start, data, 0, cuts[1])
        while children:
            yield _collect(children.pop(0), out, direct)
    finally:
        for pid, report_r, turn_w, _ in children:  # an early exit (e.g. a closed output pipe)
            os.close(report_r)
            os.close(turn_w)
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)


def _descriptor(out: IO[bytes]) -> int | None:
    """``out``'s file descriptor, None when it has none (children then write through us)."""
    try:
        return out.fileno()
    except (OSError, ValueError, AttributeError):
        return None


def _cuts(data: bytes, processes: int) -> list[int]:
    """Offsets of the shares: ``processes`` contiguous runs of whole lines (fewer if short)."""
    cuts = [0]
    for i in range(1, processes):
        cut = data.find(b"\n", max(cuts[-1], len(data) * i // processes)) + 1
        if 0 < cut < len(data):
            cuts.append(cut)
    cuts.append(len(data))
    return cuts


def _spawn(
    job: Job,
    start: int,
    data: bytes,
    begin: int,
    end: int,
    direct: int | None,
    children: list[tuple[int, int, int, int]],
) -> tuple[int, int, int, int]:
    """Fork the child scoring ``data[begin:end]``: (pid, report read end, turn write end,
    input bytes). ``children``: those already forked, whose pipe ends the new one closes."""
    report_r, report_w = os.pipe()
    turn_r, turn_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (runs in the child; the tests check its output)
        for fd in (report_r, turn_w, *(f for c in children for f in c[1:3])):
            os.close(fd)  # so that each pipe's end has one holder
        child(job, start, data, begin, end, report_w, turn_r, direct)
    os.close(report_w)
    os.close(turn_r)
    return pid, report_r, turn_w, end - begin


def _collect(forked_child: tuple[int, int, int, int], out: IO[bytes], direct: int | None) -> Block:
    """Give a child its turn to write, then its block: (output, failed, rows, input bytes)."""
    pid, report_r, turn_w, size = forked_child
    try:
        if direct is not None:
            out.flush()  # everything before this child's share is out
        with open(turn_w, "wb", buffering=0) as turn, open(report_r, "rb") as pipe:
            with contextlib.suppress(BrokenPipeError):  # the child is gone: see status
                turn.write(b"go")
            report = pipe.read()
    finally:
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status == EXIT_BROKEN_PIPE:
        raise BrokenPipeError(32, "the output was closed while a scoring process wrote")
    if status not in (0, 1):
        raise RuntimeError(f"a scoring process failed (exit status {status})")
    if direct is None:
        return report, status == 1, report.count(b"\n"), size
    return b"", status == 1, int(report), size


EXIT_BROKEN_PIPE = 74


def child(
    job: Job,
    start: int,
    data: bytes,
    begin: int,
    end: int,
    report_w: int,
    turn_r: int,
    direct: int | None,
) -> NoReturn:  # pragma: no cover (runs in the child)
    """A forked process's work (see :func:`_forked`); never returns.

    ``start`` is the number of the block's first line: the child counts the lines before its
    share itself, while its parent already scores.
    """
    status = 70
    try:
        start += data.count(b"\n", 0, begin)
        failed = False
        count = 0
        blocks = []
        for output, block_failed, rows, _ in scored(job, start, data, begin, end):
            blocks.append(output)
            failed = failed or block_failed
            count += rows
        if os.read(turn_r, 2) == b"go":  # else the parent is gone: write nothing
            if direct is None:
                report = b"".join(blocks)
            else:
                with open(direct, "wb", closefd=False) as stream:
                    stream.writelines(blocks)
                report = str(count).encode()
            with open(report_w, "wb") as pipe:
                pipe.write(report)
        status = 1 if failed else 0
    except BrokenPipeError:
        status = EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent reports it
        status = 130
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(status)
