"""The web UI against a real ``serve`` and a real database: pages, filters, keyset paging,
hostile content rendered as text, the bearer token, and cross-site request protection."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

from tests.collector.ui.harness import Running, expect, running_ui, send, wait_scored

HOSTILE = '<script>alert("x")</script>"><img src=x onerror=alert(1)>\u202eevil'


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace"), exc.headers


def post(url: str, form: dict[str, str], headers: dict[str, str] | None = None) -> tuple[int, str]:
    data = urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Location", "") or exc.read().decode(errors="replace")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


def eventually(url: str, wanted: str, within_s: float = 10.0) -> str:
    """The page once it shows ``wanted``: the period figures follow the scores within moments
    (the pipeline signals the UI after its commit)."""
    deadline = time.monotonic() + within_s
    while True:
        _, html, _ = get(url)
        if wanted in html or time.monotonic() > deadline:
            return html
        time.sleep(0.2)


def csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "no form token on the page"
    return found.group(1)


@pytest.fixture
def scored(db_url: str) -> Any:
    ids = ["conv-good", "conv-bad", "conv-missing", HOSTILE]
    expect(
        db_url, "forecast", ids, [{"name": "get_forecast", "args": {"city": "Berlin", "days": 3}}]
    )
    with running_ui(db_url) as running:
        send(
            running,
            {
                "conv-good": (
                    "rain in Berlin?",
                    [{"name": "get_forecast", "args": {"city": "Berlin", "days": 3}}],
                ),
                "conv-bad": (
                    "rain in Berlin?",
                    [{"name": "get_forecast", "args": {"city": "Berlin", "days": 5}}],
                ),
                "conv-missing": ("rain?", [{"name": "search", "args": {"q": "rain"}}]),
                HOSTILE: (HOSTILE, [{"name": HOSTILE, "args": {HOSTILE: HOSTILE}}]),
                "conv-unmatched": ("hello there", [{"name": "greet", "args": {}}]),
            },
        )
        wait_scored(db_url, [*ids, "conv-unmatched"])
        yield running


def test_the_first_page_lists_recent_conversations_with_scores_each_linked(scored: Running) -> None:
    status, html, headers = get(scored.url + "/conversations")
    assert status == 200
    for cid in ("conv-good", "conv-bad", "conv-missing", "conv-unmatched"):
        assert f'href="/conversation?id={cid}"' in html
    assert "tool_call_accuracy" in html and ">0.5<" in html
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_the_side_by_side_view_marks_the_wrong_argument_with_both_values(scored: Running) -> None:
    status, html, _ = get(scored.url + "/conversation?id=conv-bad")
    assert status == 200
    table = html[html.index('class="side-by-side"') :]
    assert "<mark>days</mark>" in table
    assert "<code>5</code>" in table and "<code>3</code>" in table
    assert "arguments differ" in table
    assert 'class="num">0.5<' in table  # the points this pair lost


def test_missing_and_extra_calls_are_marked(scored: Running) -> None:
    _, html, _ = get(scored.url + "/conversation?id=conv-missing")
    table = html[html.index('class="side-by-side"') :]
    assert "MISSING" in table and "EXTRA" in table
    assert "get_forecast" in table and "search" in table


def test_hostile_ids_messages_tool_names_and_arguments_are_rendered_as_text(
    scored: Running,
) -> None:
    for path in (
        "/conversations",
        "/conversation?id=" + urllib.parse.quote(HOSTILE, safe=""),
        "/",
        "/expectations",
    ):
        status, html, _ = get(scored.url + path)
        assert status == 200, path
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert "/static/ui.js" in html  # the only script is ours
    _, html, _ = get(scored.url + "/conversation?id=" + urllib.parse.quote(HOSTILE, safe=""))
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_filters_narrow_the_list(scored: Running) -> None:
    def ids(query: str) -> set[str]:
        _, html, _ = get(scored.url + "/conversations?" + query)
        return set(re.findall(r'href="/conversation\?id=([^"&]+)"', html))

    assert ids("status=unmatched") == {"conv-unmatched"}
    assert ids("metric=tool_call_accuracy&below=1") >= {"conv-bad", "conv-missing"}
    assert "conv-good" not in ids("metric=tool_call_accuracy&below=1")
    assert ids("q=HELLO") == {"conv-unmatched"}
    assert ids("expectation=forecast") >= {"conv-good", "conv-bad"}
    assert "conv-unmatched" not in ids("expectation=forecast")
    assert ids("since=2999-01-01") == set()


def test_pages_continue_by_keyset_without_repeating_or_skipping(
    scored: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolscore.collector.ui import pages

    monkeypatch.setattr(pages, "PAGE_SIZE", 2)
    seen: list[str] = []
    query = "/conversations"
    for _ in range(10):
        _, html, _ = get(scored.url + query)
        seen += re.findall(r'<th scope="row"><a href="/conversation\?id=([^"&]+)"', html)
        nxt = re.search(r'rel="next" href="([^"]+)"', html)
        if not nxt:
            break
        query = nxt.group(1).replace("&amp;", "&")
    assert len(seen) == 5 and len(set(seen)) == 5


def test_rescore_needs_the_form_token_and_a_same_site_origin(scored: Running) -> None:
    _, page, _ = get(scored.url + "/conversation?id=conv-bad")
    token = csrf(page)
    assert post(scored.url + "/conversation/rescore", {"id": "conv-bad"})[0] == 403
    status, _ = post(
        scored.url + "/conversation/rescore",
        {"id": "conv-bad", "csrf": token},
        {"Origin": "http://evil.example"},
    )
    assert status == 403
    status, location = post(scored.url + "/conversation/rescore", {"id": "conv-bad", "csrf": token})
    assert status == 303 and "notice=re-scored" in location


def test_unknown_conversation_is_404(scored: Running) -> None:
    assert get(scored.url + "/conversation?id=nope")[0] == 404


def test_the_expectations_page_shows_rules_and_how_many_conversations_matched(
    scored: Running,
) -> None:
    html = eventually(scored.url + "/expectations", ">4</a>")
    assert 'href="/expectation?id=forecast"' in html
    assert ">4</a>" in html  # four conversations matched it
    status, one, _ = get(scored.url + "/expectation?id=forecast")
    assert status == 200 and "Version 1" in one and "<svg" in one


def test_the_overview_shows_scores_coverage_and_health(scored: Running) -> None:
    html = eventually(scored.url + "/", 'href="/expectation?id=forecast"')
    assert "Coverage of live traffic" in html and "Scoring backlog" in html
    assert 'href="/expectation?id=forecast"' in html
    assert "<svg" in html


def test_behind_the_bearer_token_when_one_is_set(sqlite_url: str) -> None:
    with running_ui(sqlite_url, auth_token="s3cret") as running:
        status, _, headers = get(running.url + "/conversations")
        assert status == 303 and headers["Location"].startswith("/login")
        assert get(running.url + "/conversations", {"Authorization": "Bearer s3cret"})[0] == 200
        assert get(running.url + "/conversations", {"Authorization": "Bearer nope"})[0] == 303
        assert post(running.url + "/login", {"token": "nope", "next": "/"})[0] == 401
        status, location = post(
            running.url + "/login", {"token": "s3cret", "next": "//evil.example/"}
        )
        assert status == 303 and location == "/"
        assert post(running.url + "/conversation/rescore", {"id": "x"})[0] == 401


def test_promote_shows_the_expectation_then_imports_it(scored: Running) -> None:
    _, page, _ = get(scored.url + "/conversation?id=conv-unmatched")
    token = csrf(page)
    form = {"id": "conv-unmatched", "csrf": token, "match": "conversation_id"}
    assert post(scored.url + "/conversation/promote", {"id": "conv-unmatched"})[0] == 403
    status, preview = post(scored.url + "/conversation/promote", form)
    assert status == 200
    assert "promoted-conv-unmatched" in preview and "greet" in preview
    status, location = post(scored.url + "/conversation/promote/import", form)
    assert status == 303 and location == "/expectation?id=promoted-conv-unmatched"
    status, one, _ = get(scored.url + location)
    assert status == 200 and "Version 1" in one and "greet" in one
