"""``toolscore report``: the terminal summary, and the HTML page rendered in headless Chromium."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import statistics
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.collector.export.helpers import add_conversation, add_evaluation
from toolscore.collector.cli import main
from toolscore.storage.history import outbox as exports
from toolscore.storage.plumbing.engine import create_engine

DAY = dt.datetime(2026, 11, 2, 12, tzinfo=dt.UTC)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _history(engine: Engine) -> dict[int, list[float]]:
    """Accuracy scores of 'weather' over 4 days, improving; one unscorable conversation."""
    by_day: dict[int, list[float]] = {}
    with engine.begin() as conn:
        exports.save_thresholds(conn, {"tool_call_f1": 0.5})
    n = 0
    for day in range(4):
        for k in range(3):
            n += 1
            conv = f"conv-{n:02d}"
            when = DAY + dt.timedelta(days=day)
            add_conversation(engine, conv, first_seen_at=when)
            score = min(1.0, 0.25 * day + 0.25 * k)
            by_day.setdefault(day, []).append(score)
            add_evaluation(
                engine,
                conv,
                "tool_call_accuracy",
                score,
                created_at=when,
                details=_details(n, score),
            )
            add_evaluation(engine, conv, "tool_call_f1", 0.6, created_at=when)
    add_conversation(engine, "conv-broken", first_seen_at=DAY)
    add_evaluation(engine, "conv-broken", "tool_call_accuracy", None, error="bad reference")
    return by_day


def _details(n: int, score: float) -> dict[str, object]:
    """An accuracy explanation: get_weather's city wrong, and get_time missing every third."""
    pairs: list[dict[str, object]] = [{"name": "get_weather", "score": score}]
    losses: list[dict[str, object]] = []
    if score < 1.0:
        lost = 1.0 - score
        if n % 3 == 0:
            lost /= 2
            losses.append({"kind": "missing", "tool": "get_time", "expected": 1, "points": lost})
        losses.append(
            {"kind": "wrong_argument", "tool": "get_weather", "argument": "city", "expected": 0,
             "predicted": 0, "points": lost}
        )  # fmt: skip
    else:
        pairs.append({"name": "get_time", "score": 1.0})
    return {
        "reasons": [f"expected get_weather(city='Paris') <{n}>"],
        "pairs": pairs,
        "losses": losses,
    }


@pytest.fixture
def report_db(migrated_sqlite_url: str) -> tuple[str, dict[int, list[float]]]:
    engine = create_engine(migrated_sqlite_url)
    try:
        return migrated_sqlite_url, _history(engine)
    finally:
        engine.dispose()


def test_terminal_summary_per_expectation_and_metric(
    report_db: tuple[str, dict[int, list[float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, by_day = report_db
    status = main(["report", "--db", url, "--since", "2026-11-01", "--until", "2026-11-30"])
    out = capsys.readouterr().out
    assert status == 0
    scores = [s for day in by_day.values() for s in day]
    passed = sum(s >= 1.0 for s in scores) / len(scores)
    summary = out.split("Tools most often wrong", 1)[0].splitlines()
    [acc] = [line for line in summary if "tool_call_accuracy" in line]
    cells = acc.split()
    assert cells[2:6] == ["13", "12", f"{statistics.fmean(scores):.3f}", f"{passed * 100:.1f}%"]
    early = statistics.fmean(by_day[0] + by_day[1])
    late = statistics.fmean(by_day[2] + by_day[3])
    assert f"↑ {late - early:+.3f}" in acc
    [f1] = [line for line in summary if "tool_call_f1" in line]
    assert "0.600" in f1 and "100.0%" in f1 and "→ flat" in f1
    assert "Worst conversations" in out
    worst_block = out.split("Worst conversations", 1)[1]
    assert worst_block.index("conv-broken") < worst_block.index("conv-01")  # errors first
    assert "not scored: bad reference" in worst_block
    tools = out.split("Tools most often wrong", 1)[1].split("Worst conversations", 1)[0]
    failing = [(n, s) for n, s in enumerate(scores, 1) if s < 1.0]  # n: as _details numbers them
    weather_lost = sum((1.0 - s) / (2 if n % 3 == 0 else 1) for n, s in failing)
    missing = sum(n % 3 == 0 for n, _ in failing)
    [weather, arguments, time_] = tools.strip("\n").splitlines()[1:]  # most failures first
    assert weather == (
        f"  get_weather (tool_call_accuracy): {len(failing)} wrong of {len(scores)} expected, "
        f"{len(scores)} called; {weather_lost:.2f} points lost"
    )
    assert arguments == f"          wrong arguments: city ×{len(failing)}"
    assert time_.startswith(f"  get_time (tool_call_accuracy): {missing} missing of ")


def test_report_rejects_a_bad_date(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--since", "last tuesday"])
    assert "invalid date 'last tuesday'" in capsys.readouterr().err


def test_empty_period_says_so(
    report_db: tuple[str, dict[int, list[float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = report_db
    assert main(["report", "--db", url, "--since", "2020-01-01", "--until", "2020-01-31"]) == 0
    assert "No scored conversations in this period." in capsys.readouterr().out


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of raw pixel bytes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows]


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_html_report_renders_in_a_headless_browser(
    report_db: tuple[str, dict[int, list[float]]], tmp_path: Path
) -> None:
    url, by_day = report_db
    page = tmp_path / "report.html"
    args = ["report", "--db", url, "--since", "2026-11-01", "--until", "2026-11-07"]
    assert main([*args, "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    # self-contained: no script, stylesheet, image or font fetched from anywhere
    assert not re.search(r"<script|<link|<img|@import|url\(|src=|href=", html)
    assert html.count("<svg") == 2

    shot = tmp_path / "report.png"
    done = _chromium(
        f"--screenshot={shot}", "--window-size=1200,1400", page.as_uri(), profile=tmp_path / "p1"
    )
    assert shot.exists(), f"chromium wrote no screenshot: {done.stderr[-2000:]}"
    width, height, rows = _png_pixels(shot)
    assert (width, height) == (1200, 1400)
    colours = {row[i : i + 3] for row in rows[::7] for i in range(0, len(row), 3 * 5)}
    assert len(colours) > 20, "the screenshot is blank"
    blue = bytes((0x09, 0x69, 0xDA))  # the chart line colour is drawn somewhere
    assert any(blue in row for row in rows)
    # the charts span the page: a grid line runs across at least 85% of the window's width
    channels = len(rows[0]) // width
    grid = bytes((0xD1, 0xD9, 0xE0))
    assert max(_run(row, grid, channels) for row in rows) > 0.85 * width
    # the pass thresholds are drawn as dashed red lines across the chart
    red = bytes((0xCF, 0x22, 0x2E))
    assert sum(_count(row, red, channels) > 0.4 * width for row in rows) >= 2

    dom = _chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    text = re.sub(r"\s+", " ", text)
    scores = [s for day in by_day.values() for s in day]
    assert f"weather tool_call_accuracy 13 12 {statistics.fmean(scores):.3f}" in text
    assert "Worst conversations" in text and "not scored: bad reference" in text
    assert "expected get_weather(city='Paris') &lt;1&gt;" in dom.stdout  # escaped, not markup
    # dates on each chart's axis, every day of the period (room enough at 7 days)
    dates = re.findall(r'class="date"[^>]*>([^<]+)<', dom.stdout)
    week = ["2026-11-01", *(f"11-{d:02d}" for d in range(2, 8))]
    assert dates == week * 2
    # the daily counts: one bar and its number per day with scores (the accuracy chart's first
    # day has the unscorable conversation too)
    counts = re.findall(r'<text[^>]*class="count"[^>]*>(\d+)<', dom.stdout)
    assert counts == ["4", "3", "3", "3"] + ["3"] * 4
    assert "pass ≥ 1" in text and "pass ≥ 0.5" in text
    # the tools most often wrong, from the tool_scores view
    assert "Tools most often wrong" in text
    assert "get_weather tool_call_accuracy 12 12 9 0 0 0 4.38 city ×9" in text
    assert "get_time tool_call_accuracy 5 3 0 2 0 0 0.38" in text


def _run(row: bytes, colour: bytes, channels: int) -> int:
    """The longest horizontal run of pixels of ``colour`` in a row of RGB or RGBA pixels."""
    best = current = 0
    for i in range(0, len(row), channels):
        current = current + 1 if row[i : i + 3] == colour else 0
        best = max(best, current)
    return best


def _count(row: bytes, colour: bytes, channels: int) -> int:
    return sum(row[i : i + 3] == colour for i in range(0, len(row), channels))
