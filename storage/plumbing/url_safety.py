"""Database URLs in messages without their secrets, and the checks that find malformed ones.

A database URL may carry a password (``user:PASSWORD@host``, or ``?password=`` in the query) and
comes from a flag or ``TOOLSCORE_DB``, so every message that shows one goes through
:func:`url_text`. A malformed URL is the hard case: SQLAlchemy cannot parse it, or parses it
wrongly (an unencoded ``@`` in the password puts the password's tail into the host, a ``:`` into
the port), and the driver then echoes those parts. So the text form hides everything between
``user:`` and the *last* ``@``, and :func:`url_problem` rejects such URLs before any driver sees
them. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from sqlalchemy.engine import URL

HIDDEN = "***"
UNPARSEABLE = "<invalid database URL>"
MAX_PORT = 65_535

_SCHEME = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.\-]*://")
# scheme://user: ... up to the last "@" on the line (a password may hold unencoded "@")
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@?#\s]*:)[^\n]*@")
_QUERY_SECRET = re.compile(r"(?i)(?P<key>[?&](?:password|sslpassword|passfile)=)[^&#\s]*")
_ENCODE_HINT = (
    "percent-encode special characters in the user name and password "
    "('@' as %40, ':' as %3A, '/' as %2F)"
)


def hide_secrets(text: str) -> str:
    """``text`` with every URL password shown as ``***`` (also ``?password=`` values)."""
    text = _USERINFO.sub(lambda m: f"{m['head']}{HIDDEN}@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}{HIDDEN}", text)


def url_text(url: str | URL) -> str:
    """The URL as text with its password hidden, safe to print even when it is malformed.

    Text that does not look like a URL at all is not shown (it may be a secret pasted in the
    wrong place).
    """
    if isinstance(url, URL):
        return hide_secrets(url.render_as_string(hide_password=True))
    text = str(url).strip()
    if not _SCHEME.match(text):
        return UNPARSEABLE
    return hide_secrets(text)


def parse_error_reason(exc: Exception) -> str:
    """Why SQLAlchemy could not parse a URL, without echoing parts of it (they may be secret)."""
    if isinstance(exc, ValueError) and "int()" in str(exc):
        return f"the port is not a number ({_ENCODE_HINT})"
    return "expected dialect+driver://user:password@host:port/name or sqlite:///PATH"


def url_problem(parsed: URL) -> str | None:
    """What is wrong with a URL SQLAlchemy did parse, if anything (never echoing a secret)."""
    host = parsed.host or ""
    if "@" in host or "@" in (parsed.username or ""):
        return f"'@' in the user name or password must be percent-encoded as %40 ({_ENCODE_HINT})"
    if parsed.port is not None and not 0 < parsed.port <= MAX_PORT:
        return f"port {parsed.port} is out of range 1-{MAX_PORT}"
    return None


def without_password(text: str, url: str | URL) -> str:
    """``text`` (e.g. a driver's error message) with ``url``'s password, in any of its encoded
    forms, and any URL password replaced by ``***``."""
    secrets: set[str] = set()
    password = url.password if isinstance(url, URL) else None
    if isinstance(url, str):
        match = re.search(r"://[^:/@?#\s]*:([^\n]*)@", url)
        password = match.group(1) if match else None
        secrets.update(m.group(1) for m in re.finditer(r"(?i)[?&]password=([^&#\s]*)", url))
    if password:
        secrets.update({password, unquote(password), quote(password, safe="")})
        # a malformed URL's driver error may quote a piece of it (the "host" after an "@")
        for form in (password, unquote(password)):
            secrets.update(p for p in re.split(r"[@:/]", form) if len(p) >= 3)
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return hide_secrets(text)
