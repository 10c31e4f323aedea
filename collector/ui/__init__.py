"""The web UI: find the failing conversations, see why, fix the reference.

Server-rendered pages (aiohttp + Jinja2, assets shipped in the package, no build step) on a
listener of their own, behind ``serve``'s bearer token when one is set: an overview (scores,
coverage, health), conversations filtered and paged by keyset, one conversation with the
predicted and reference calls side by side, expectations with their versions and trends.

May import: ``views`` (report data, conversation loading), ``pipeline`` (re-scoring),
``expectations`` (promotion), the spine's settings and components, storage.
"""
