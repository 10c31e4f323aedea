"""The web UI in a real browser (Debian's headless Chromium driven by Playwright): a new user's
path from the overview to a failing conversation's side-by-side view, keyboard navigation, the
list updating while conversations are scored, re-scoring, and hostile content staying inert.

Screenshots of the main pages are written to ``TOOLSCORE_UI_SCREENSHOTS`` when it is set
(docs/ui.md's images are made so) and to a temporary folder otherwise.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.collector.ui.harness import Running, expect, running_ui, send, wait_scored

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)
XSS = '<img src=x onerror="window.__pwned=1">'
FORECAST = [{"name": "get_forecast", "args": {"city": "Berlin", "days": 3}}]


@pytest.fixture
def browser() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TOOLSCORE_UI_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def served(sqlite_url: str) -> Iterator[Running]:
    ids = ["berlin-ok", "berlin-5-days", XSS]
    expect(sqlite_url, "forecast-berlin", [*ids, "live-1"], FORECAST)
    with running_ui(sqlite_url) as running:
        send(
            running,
            {
                "berlin-ok": ("Will it rain in Berlin in the next 3 days?", FORECAST),
                "berlin-5-days": (
                    "Will it rain in Berlin in the next 3 days?",
                    [{"name": "get_forecast", "args": {"city": "Berlin", "days": 5}}],
                ),
                XSS: (XSS, [{"name": XSS, "args": {XSS: XSS}}]),
            },
        )
        wait_scored(sqlite_url, ids)
        yield running


def _shot(page: Any, shots: Path, name: str) -> None:
    path = shots / f"ui-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000, f"{name}: the screenshot looks blank"


def test_from_the_overview_to_the_side_by_side_view(
    served: Running, browser: Any, shots: Path
) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(served.url + "/")
    assert page.title() == "Overview · toolscore"
    assert page.get_by_role("heading", name="Coverage of live traffic").is_visible()
    _shot(page, shots, "overview")
    page.get_by_role("link", name="Conversations", exact=True).click()
    page.wait_for_url("**/conversations")
    _shot(page, shots, "conversations")
    page.get_by_role("link", name="berlin-5-days").click()
    page.wait_for_url("**/conversation?id=berlin-5-days")
    table = page.locator("table.side-by-side").first
    assert table.locator("mark", has_text="days").is_visible()
    row = table.locator("tbody > tr").first
    assert "✗ arguments differ" in row.inner_text()
    wrong = table.locator("table.args-diff tbody tr").first.inner_text()
    assert "days" in wrong and "5" in wrong and "3" in wrong
    _shot(page, shots, "conversation")


def test_the_pages_work_from_the_keyboard(served: Running, browser: Any) -> None:
    page = browser.new_page()
    page.goto(served.url + "/")
    page.keyboard.press("Tab")  # the skip link comes first
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    for _ in range(2):  # Overview, then Conversations
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Conversations"
    page.keyboard.press("Enter")
    page.wait_for_url("**/conversations")
    page.get_by_label("Status").select_option("scored")
    page.get_by_role("button", name="Filter").press("Enter")
    page.wait_for_url("**status=scored**")
    assert page.get_by_role("link", name="berlin-ok").is_visible()


def test_the_list_updates_while_new_conversations_are_scored(
    served: Running, browser: Any, sqlite_url: str
) -> None:
    page = browser.new_page()
    page.goto(served.url + "/conversations")
    assert page.get_by_role("link", name="live-1").count() == 0
    send(served, {"live-1": ("Will it rain in Berlin in the next 3 days?", FORECAST)})
    wait_scored(sqlite_url, ["live-1"])
    page.get_by_role("link", name="live-1").wait_for(timeout=20_000)  # no reload
    assert page.url.endswith("/conversations")


def test_rescore_from_the_page(served: Running, browser: Any) -> None:
    page = browser.new_page()
    page.goto(served.url + "/conversation?id=berlin-5-days")
    page.get_by_role("button", name="Re-score now").click()
    page.wait_for_url("**notice=**")
    assert "re-scored" in page.get_by_role("status").inner_text()


def test_hostile_content_stays_text_in_the_browser(served: Running, browser: Any) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for path in ("/", "/expectations", "/conversations"):
        page.goto(served.url + path)
    page.get_by_role("link", name=XSS).first.click()
    page.wait_for_load_state()
    time.sleep(0.5)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("h1 code").inner_text() == XSS
    assert errors == []
