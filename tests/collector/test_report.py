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

from tests.collector.export.helpers import add_conversation, add_evaluation, migrated_engine
from toolscore.collector.cli import main
from toolscore.storage import exports

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
                details={"reasons": [f"expected get_weather(city='Paris') <{n}>"]},
            )
            add_evaluation(engine, conv, "tool_call_f1", 0.6, created_at=when)
    add_conversation(engine, "conv-broken", first_seen_at=DAY)
    add_evaluation(engine, "conv-broken", "tool_call_accuracy", None, error="bad reference")
    return by_day


@pytest.fixture
def report_db(sqlite_url: str) -> tuple[str, dict[int, list[float]]]:
    engine = migrated_engine(sqlite_url)
    try:
        return sqlite_url, _history(engine)
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
    summary = out.split("Worst conversations", 1)[0].splitlines()
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

    dom = _chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p2")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    text = re.sub(r"\s+", " ", text)
    scores = [s for day in by_day.values() for s in day]
    assert f"weather tool_call_accuracy 13 12 {statistics.fmean(scores):.3f}" in text
    assert "Worst conversations" in text and "not scored: bad reference" in text
    assert "expected get_weather(city='Paris') &lt;1&gt;" in dom.stdout  # escaped, not markup
