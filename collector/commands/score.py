"""``toolscore score [FILE|-] [--config FILE]``: score Ragas samples offline.

Reads JSON Lines of Ragas ``MultiTurnSample`` (or Ragas's exported dataset as one JSON array or a
``{"samples": [...]}`` document) and writes one JSON object per sample, in order, to stdout:
``{"id": ..., "<instance>": <float|null>, ..., "details": {...}}`` plus ``"errors"`` when a metric
could not score, or ``"error"`` (naming the input line) when the line itself is unusable. Blank
lines are skipped. Exit status: 0 all scored, 1 if any line failed, 2 on a usage error.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import stat
import sys
import time
from itertools import pairwise

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable, Iterator
    from typing import IO, Any, NoReturn

    Item = tuple[str, Any, str | None, int]  # where, decoded sample, problem, input bytes
    Block = tuple[bytes, bool, int, int]  # output, any failure, samples, input bytes
    Chunk = tuple[int, list[bytes]]  # first line number, raw lines

_CHUNK_LINES = 1000  # lines of a pipe scored at a time
#: Lines of a regular file scored at a time, in bytes: below glibc's mmap threshold (128 KiB),
#: so that each chunk's buffers reuse the last one's memory instead of faulting in new pages.
_CHUNK_BYTES = 64 << 10
#: A regular file is read in blocks of whole lines of about this size (memory stays flat);
#: larger ones when forking, so that a fork (~1-3 ms) is paid once per ~20,000 samples.
_SEGMENT_BYTES = 1 << 20
_FORKED_SEGMENT_BYTES = 16 << 20
#: Below this many bytes of input per process, forking another does not pay: a fork and its
#: collection cost ~2-3 ms of CPU (1 MiB is ~1,400 of the benchmark's samples, ~20 ms of work),
#: and nothing is gained when the other core is busy. Bytes, not lines: counting lines before
#: the fork would cost ~0.4 ms per MiB on the critical path.
_MIN_BYTES_PER_PROCESS = 1 << 20
#: One process per core (up to 4) for regular files of 2 MiB or more.
_DEFAULT_JOBS = 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "score",
        help="score Ragas MultiTurnSample JSON Lines (ToolCallAccuracy, ToolCallF1, ...)",
        description=(
            "Score JSON Lines of Ragas MultiTurnSamples; writes one JSON line per sample to "
            "stdout. Exit status 1 if any line failed, 2 on usage errors."
        ),
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE|-",
        help="JSON Lines (or a Ragas dataset JSON document); '-' or nothing reads stdin",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="metric instances (YAML or JSON); default: tool_call_accuracy and tool_call_f1",
    )
    parser.add_argument(
        "--no-details", action="store_true", help="omit the explanations (smaller, faster output)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=_DEFAULT_JOBS,
        metavar="N",
        help=(
            "processes scoring a regular file (default 0: one per core, up to 4; 1: this one "
            f"only); each gets at least {_MIN_BYTES_PER_PROCESS >> 20} MiB"
        ),
    )
    parser.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit status 1 when METRIC's mean over the scored samples is below VALUE; a "
        "summary per metric goes to stderr (repeatable; scores in one process)",
    )
    parser.add_argument(
        "--pass-threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="score at or above which a sample passes METRIC (pass rate, JUnit; default 1.0)",
    )
    parser.add_argument(
        "--junit",
        metavar="PATH",
        help="write JUnit XML: a test case per sample and metric, failing below its threshold",
    )
    parser.set_defaults(handler=_handle)


def quick_args(argv: list[str]) -> argparse.Namespace | None:
    """``score``'s arguments in their plain forms, parsed without building the argparse parser.

    argparse and what it loads (gettext, locale, shutil) cost ~4 ms of start-up, a tenth of
    it. Anything else (help, ``--opt=value``, abbreviations, values starting with ``-``,
    mistakes) answers ``None``, and the caller hands the whole command line to argparse.
    """
    from types import SimpleNamespace

    file, config, no_details, jobs = None, None, False, _DEFAULT_JOBS
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--no-details":
            no_details = True
        elif arg in ("--config", "--jobs"):
            if i + 1 == len(argv) or argv[i + 1].startswith("-"):
                return None
            i += 1
            if arg == "--config":
                config = argv[i]
            elif argv[i].isascii() and argv[i].isdigit():
                jobs = int(argv[i])
            else:
                return None
        elif (arg == "-" or not arg.startswith("-")) and file is None:
            file = arg
        else:
            return None
        i += 1
    namespace = SimpleNamespace(
        command="score",
        file="-" if file is None else file,
        config=config,
        no_details=no_details,
        jobs=jobs,
        fail_under=[],
        pass_threshold=[],
        junit=None,
        handler=_handle,
    )
    return namespace  # type: ignore[return-value]  # the attributes argparse would set


def _handle(args: argparse.Namespace) -> int:
    config = None  # the default configuration is only built if a sample needs the general path
    if args.config is not None:
        from toolscore.scorer import ConfigError, load_config

        try:
            config = load_config(args.config)
        except ConfigError as exc:
            print(f"toolscore score: {exc}", file=sys.stderr)
            return 2
    try:
        source: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"toolscore score: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        gate = _gate(args, config)
    except ValueError as exc:
        print(f"toolscore score: {exc}", file=sys.stderr)
        return 2
    total = _size(source)
    jobs = args.jobs if args.jobs > 0 else _cores()
    progress = _Progress(sys.stderr, total) if sys.stderr.isatty() else None
    job = _Job(config, not args.no_details)
    try:
        if gate is not None:
            return _gated_run(job, source, progress, gate, getattr(args, "junit", None))
        return run(job, source, sys.stdout.buffer, progress=progress, jobs=jobs)
    except BrokenPipeError:  # e.g. `toolscore score big.jsonl | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail
        return 1
    finally:
        if progress is not None:
            progress.close()
        if source is not sys.stdin.buffer:
            source.close()


def _gate(args: argparse.Namespace, config: Any) -> Any:
    """The CI gate the flags ask for (``None`` without ``--fail-under`` / ``--junit``)."""
    fail_under = getattr(args, "fail_under", None) or []
    junit = getattr(args, "junit", None)
    if not fail_under and junit is None:
        return None
    from toolscore.collector.gate import ScoreGate, parse_levels
    from toolscore.scorer import default_config

    names = list((config or default_config()).instances)
    return ScoreGate(
        names,
        pass_thresholds=parse_levels(
            getattr(args, "pass_threshold", []), "--pass-threshold", names
        ),
        fail_under=parse_levels(fail_under, "--fail-under", names),
        keep_cases=junit is not None,
    )


def _gated_run(job: _Job, source: IO[bytes], progress: Any, gate: Any, junit: str | None) -> int:
    """Score in this process, feeding every output row to ``gate``; then report on it."""
    out = _GatedOutput(sys.stdout.buffer, gate)
    status = run(job, source, out, progress=progress, jobs=1)  # type: ignore[arg-type]
    for line in gate.summary_lines():
        print(line, file=sys.stderr)
    if junit is not None:
        try:
            with open(junit, "wb") as stream:
                gate.write_junit(stream)
        except OSError as exc:
            print(f"toolscore score: cannot write {junit}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 1 if status or gate.failed() else 0


class _GatedOutput:
    """The output stream, read back row by row by the gate as it is written."""

    def __init__(self, out: IO[bytes], gate: Any) -> None:
        import orjson

        self._out, self._gate, self._loads = out, gate, orjson.loads
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


def _cores() -> int:
    """``--jobs 0``: one process per core this process may run on, up to 4.

    Measured on a shared 2-core machine: a second process took 10,000 samples from 0.17 s to
    0.10 s when the other core was free, and from 0.22 s to 0.23 s when other programs kept
    both busy; sampling the load at start chose one process too often to pay.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def _size(source: IO[bytes]) -> int | None:
    try:
        return os.fstat(source.fileno()).st_size or None
    except (OSError, ValueError):
        return None


class _Job:
    """What scoring a chunk of lines needs (forked processes inherit it).

    ``config`` ``None`` means the default instances; it is then built only when a sample needs
    the general path (the fast path of :mod:`toolscore.scorer.bulk` needs only the instance names).
    """

    def __init__(self, config: Any, details: bool) -> None:
        from toolscore.scorer.bulk import DEFAULT_PLAN, bulk_plan

        self._config, self.details = config, details
        self.plan = DEFAULT_PLAN if config is None else bulk_plan(config.instances)
        self.codec = _Codec()
        self.loads, self.dumps = self.codec.loads, self.codec.dumps
        self.lines = 0  # scored since the last sweep of the cycle collector

    @property
    def config(self) -> Any:
        if self._config is None:
            from toolscore.scorer import default_config

            self._config = default_config()
        return self._config

    def score_items(self, items: Iterable[Item]) -> Block:
        from toolscore.scorer.bulk import fast_row

        plan, details, dumps = self.plan, self.details, self.dumps
        out: list[bytes] = []
        failed = False
        size = 0
        for where, obj, problem, consumed in items:
            row = None
            if problem is None and plan is not None:
                row = fast_row(plan, obj, details)
            if row is None:
                row, ok = self._general(where, obj, problem)
                failed = failed or not ok
            out.append(dumps(row))
            size += consumed
        return b"".join(out), failed, len(out), size

    def _general(self, where: str, obj: Any, problem: str | None) -> tuple[dict[str, Any], bool]:
        from toolscore.scorer.rows import error_row, score_row

        if problem is not None:
            return error_row(self.config, f"{where}: {problem}"), False
        return score_row(self.config, obj, where=where, details=self.details)

    def score_chunk(self, chunk: Chunk) -> Block:
        start, lines = chunk
        codec = self.codec
        # One long-number test for the whole chunk; lines then go straight to orjson.
        return self.score_lines(start, lines, codec.has_long_numbers(b"".join(lines)))

    def score_lines(self, start: int, lines: list[bytes], long_numbers: bool) -> Block:
        """The block of ``lines``, the first being line ``start``.

        ``long_numbers`` false says no line holds a run of 19 digits (see ``_Codec``), so that
        lines go straight to orjson. The hot loop of the command: a well-formed sample goes
        through orjson, :func:`~toolscore.scorer.bulk.fast_row`
        and orjson with no other per-line work
        (no Python-level wrapper calls); blank lines, what only ``json`` reads, bad JSON,
        ``{"samples": [...]}`` wrappers and the general path are sorted out only when a step
        fails.
        """
        from toolscore.scorer.bulk import fast_row

        self.lines += len(lines)
        if self.lines >= 50_000:  # the collector is off during runs; sweep stray cycles
            self.lines = 0
            gc.collect()
        codec = self.codec
        loads = codec.loads if long_numbers else codec.orjson_loads
        dumps, newline = codec.orjson_dumps, codec.newline
        plan, details = self.plan, self.details
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
                    out.append(self.dumps(self._general(*_bad_line(number, exc, 0)[:3])[0]))
                    failed = True
                    continue
            row = None if plan is None else fast_row(plan, obj, details)
            if row is None:
                if type(obj) is dict and "samples" in obj and "user_input" not in obj:
                    block = self.score_items(_document_object(obj, number, 0))
                    out.append(block[0])
                    failed = failed or block[1]
                    wrapped += block[2] - 1
                    continue
                row, ok = self._general(f"line {number}", obj, None)
                failed = failed or not ok
            try:
                out.append(dumps(row, None, newline))
            except TypeError:  # e.g. an integer id beyond 64 bits
                out.append(self.dumps(row))
        return b"".join(out), failed, len(out) + wrapped, sum(map(len, lines))


def run(
    job: _Job,
    source: IO[bytes],
    out: IO[bytes],
    *,
    progress: _Progress | None = None,
    jobs: int = 1,
) -> int:
    """Score every sample of ``source`` into ``out``; 1 if any failed, else 0."""
    gc.disable()  # rows are acyclic and short-lived; the cyclic collector only costs time here
    failed = False
    try:
        for data, block_failed, count, size in _blocks(job, source, jobs, out):
            out.write(data)
            failed = failed or block_failed
            if progress is not None:
                progress.advance(count, size)
    finally:
        gc.enable()
    out.flush()
    return 1 if failed else 0


def _blocks(job: _Job, source: IO[bytes], jobs: int, out: IO[bytes]) -> Iterator[Block]:
    head, rest = _start(source, job.loads)
    if head:
        yield job.score_items(head)
    if rest is None:
        return
    number, lines = rest
    if lines is not source or not _is_regular(source):
        # A pipe or terminal (lines scored as they come) or an already split document.
        for chunk in _chunks(lines, number):
            yield job.score_chunk(chunk)
        return
    for start, data in _segments(
        source, number, _FORKED_SEGMENT_BYTES if jobs > 1 else _SEGMENT_BYTES
    ):
        processes = min(jobs, len(data) // _MIN_BYTES_PER_PROCESS)
        if processes > 1 and hasattr(os, "fork"):
            yield from _forked(job, start, data, processes, out)
        else:
            yield from _scored(job, start, data)


def _is_regular(source: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def _segments(source: IO[bytes], number: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Whole lines of a regular file in blocks of about ``size`` bytes, with the number of each
    block's first line."""
    data = source.read(size)
    while data:
        if not data.endswith(b"\n"):
            data += source.readline()
        yield number, data
        following = source.read(size)
        if following:  # lines are counted only when a block follows (the count takes time)
            number += data.count(b"\n")
        data = following


def _scored(job: _Job, start: int, data: bytes, begin: int = 0, end: int = -1) -> Iterator[Block]:
    """The blocks of the whole lines ``data[begin:end]``, whose first line is line ``start``.

    Chunks of about ``_CHUNK_BYTES``: their memory is reused from one chunk to the next, and
    ``data`` is not copied (a forked process reads its share of its parent's block in place).
    """
    codec = job.codec
    if end < 0:
        end = len(data)
    stream = io.BytesIO(data)  # shares data's buffer
    stream.seek(begin)
    while begin < end:
        lines = stream.readlines(_CHUNK_BYTES)  # split on b"\n" only, as files are
        stop = stream.tell()
        while stop > end:  # past the share's last line (shares end where lines end)
            stop -= len(lines.pop())
        # One long-number test for the chunk; its lines then go straight to orjson.
        long = codec.has_long_numbers(data[begin:stop])
        yield job.score_lines(start, lines, long)
        start += len(lines)
        begin = stop


def _forked(job: _Job, start: int, data: bytes, processes: int, out: IO[bytes]) -> Iterator[Block]:
    """Score whole lines ``data`` in ``processes`` processes, each a contiguous share, in order.

    This process scores the first share while forked children score the others: forking
    costs ~1 ms and shares the loaded modules and the configuration. A child scores its share
    into memory, waits for its turn, writes its output straight to ``out``'s file descriptor
    (through this process, over a pipe, when ``out`` has none: that costs ~2 ms per MB),
    reports how many rows it wrote and exits with 1 if any of its lines failed, else 0.
    """
    try:
        direct: int | None = out.fileno()
    except (OSError, ValueError, AttributeError):
        direct = None
    cuts = [0]
    for i in range(1, processes):
        cut = data.find(b"\n", max(cuts[-1], len(data) * i // processes)) + 1
        if 0 < cut < len(data):
            cuts.append(cut)
    cuts.append(len(data))
    children: list[tuple[int, int, int, int]] = []  # pid, report (read end), turn, input bytes
    try:
        for begin, end in pairwise(cuts[1:]):
            report_r, report_w = os.pipe()
            turn_r, turn_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover (runs in the child; the tests check its output)
                for fd in (report_r, turn_w, *(f for c in children for f in c[1:3])):
                    os.close(fd)  # so that each pipe's end has one holder
                _child(job, start, data, begin, end, report_w, turn_r, direct)
            os.close(report_w)
            os.close(turn_r)
            children.append((pid, report_r, turn_w, end - begin))
        yield from _scored(job, start, data, 0, cuts[1])
        while children:
            pid, report_r, turn_w, size = children.pop(0)
            try:
                if direct is not None:
                    out.flush()  # everything before this child's share is out
                with open(turn_w, "wb", buffering=0) as turn, open(report_r, "rb") as pipe:
                    with contextlib.suppress(BrokenPipeError):  # the child is gone: see status
                        turn.write(b"go")
                    report = pipe.read()
            finally:
                status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if status == _EXIT_BROKEN_PIPE:
                raise BrokenPipeError(32, "the output was closed while a scoring process wrote")
            if status not in (0, 1):
                raise RuntimeError(f"a scoring process failed (exit status {status})")
            if direct is None:
                yield report, status == 1, report.count(b"\n"), size
            else:
                yield b"", status == 1, int(report), size
    finally:
        for pid, report_r, turn_w, _ in children:  # an early exit (e.g. a closed output pipe)
            os.close(report_r)
            os.close(turn_w)
            os.kill(pid, 15)  # SIGTERM (the signal module costs start-up time)
            os.waitpid(pid, 0)


_EXIT_BROKEN_PIPE = 74


def _child(
    job: _Job,
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
        for output, block_failed, rows, _ in _scored(job, start, data, begin, end):
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
        status = _EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the parent reports it
        status = 130
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _chunks(lines: Iterable[bytes], number: int) -> Iterator[Chunk]:
    batch: list[bytes] = []
    start = number
    for raw in lines:
        batch.append(raw)
        if len(batch) >= _CHUNK_LINES:
            yield start, batch
            start += len(batch)
            batch = []
    if batch:
        yield start, batch


class _Codec:
    """orjson where it gives exactly what Python's ``json`` gives, ``json`` otherwise."""

    def __init__(self) -> None:
        import json  # loaded by orjson anyway (its JSONDecodeError subclasses json's)

        import orjson

        self.json_loads, self._json_dumps = json.loads, json.dumps
        self.orjson_loads, self.orjson_dumps = orjson.loads, orjson.dumps
        self.newline = orjson.OPT_APPEND_NEWLINE
        # orjson turns integers beyond 64 bits into floats (str() differs): json reads any line
        # with a run of 19+ digits. A translate + substring test is ~10x cheaper than a regex,
        # and one test per chunk of lines cheaper still.
        self._digits_as_ones = bytes(49 if 48 <= i <= 57 else 48 for i in range(256))
        self._nineteen_ones = b"1" * 19

    def has_long_numbers(self, data: bytes) -> bool:
        """Whether ``data`` may hold an integer that orjson would not read as ``json`` does."""
        return self._nineteen_ones in data.translate(self._digits_as_ones)

    def loads(self, data: bytes) -> Any:
        """Decode one line whatever it holds."""
        if self.has_long_numbers(data):
            return self.json_loads(data)
        try:
            return self.orjson_loads(data)
        except ValueError:
            pass  # NaN, Infinity, lone surrogates: json accepts them, as Ragas users' json does
        return self.json_loads(data)

    def dumps(self, row: Any) -> bytes:
        """One output line."""
        try:
            return self.orjson_dumps(row, None, self.newline)
        except TypeError:  # e.g. an integer id beyond 64 bits
            text: str = self._json_dumps(row, ensure_ascii=False)
            return text.encode("utf-8", "surrogatepass") + b"\n"


def _start(
    source: IO[bytes], loads: Callable[[bytes], Any]
) -> tuple[list[Item], tuple[int, Iterable[bytes]] | None]:
    """Items decided by the first non-blank line, and the remaining JSON Lines (if any).

    A first line starting with ``[`` (or a ``{`` that only parses together with the rest) means
    one JSON document: a Ragas dataset array, a ``{"samples": [...]}`` wrapper, or one sample.
    """
    lines = iter(source)
    number, first = 0, b""
    for raw in lines:
        number += 1
        first = raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw
        if first.strip():
            break
    head = first.lstrip()
    if not head:
        return [], None
    if head.startswith(b"["):
        rest = source.read()
        try:
            document = loads(first + rest)
        except ValueError as exc:  # not one document: JSON Lines whose first line is bad
            return [_bad_line(number, exc, len(first))], (
                number + 1,
                rest.splitlines(keepends=True),
            )
        return list(_document_object(document, number, len(first) + len(rest))), None
    try:
        obj = loads(first)
    except ValueError as exc:
        if not head.startswith(b"{"):
            return [_bad_line(number, exc, len(first))], (number + 1, lines)
        rest = source.read()  # maybe a pretty-printed document spanning lines
        try:
            whole = loads(first + rest)
        except ValueError:
            return [_bad_line(number, exc, len(first))], (
                number + 1,
                rest.splitlines(keepends=True),
            )
        return list(_document_object(whole, number, len(first) + len(rest))), None
    return list(_document_object(obj, number, len(first))), (number + 1, lines)


def _bad_line(number: int, exc: Exception, size: int) -> Item:
    return (f"line {number}", None, f"not valid JSON: {_json_problem(exc)}", size)


def _json_problem(exc: Exception) -> str:
    import json

    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}" if exc.lineno == 1 else str(exc)
    return str(exc)


def _document_object(obj: Any, number: int, size: int) -> Iterator[Item]:
    """A JSON array of samples, a ``{"samples": [...]}`` wrapper, or one sample."""
    samples = obj.get("samples") if type(obj) is dict and "user_input" not in obj else obj
    if type(samples) is not list:
        yield (f"line {number}", obj, None, size)
        return
    share = size // max(1, len(samples))
    for index, sample in enumerate(samples, 1):
        yield (f"line {number}, sample {index}", sample, None, share)


class _Progress:
    """A one-line progress report on a terminal's stderr, redrawn at most 5 times a second."""

    def __init__(self, stream: IO[str], total_bytes: int | None) -> None:
        self.stream, self.total = stream, total_bytes
        self.count = self.done = 0
        self.started = self.last = time.monotonic()

    def advance(self, count: int, size: int) -> None:
        self.count += count
        self.done += size
        now = time.monotonic()
        if now - self.last >= 0.2:
            self.last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.count / max(now - self.started, 1e-9)
        text = f"\rtoolscore score: {self.count:,} samples ({rate:,.0f}/s)"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(fraction * 30)
            text += f" [{'#' * filled}{'.' * (30 - filled)}] {fraction:.0%}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.count:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
