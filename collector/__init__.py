"""The service: OTLP in, scored conversations out. Rooms follow a span's path:

- ``receiver/``: gRPC and HTTP transports, admission (sizes, slots, auth), status mapping;
- ``otlp/``: request bodies to decoded records (pure), with the per-item checks;
- ``ingest/``: the bounded queue and group-commit writer (acknowledged = committed), metrics;
- ``reconstruction/``: spans and log records to a transcript of tool calls (pure), with the
  instrumentation ``conventions/`` inside;
- ``pipeline/``: conversation bookkeeping, completion, claims, scoring rounds, re-scoring;
- ``export/``: write-back of evaluations (OTLP spans and log events, outbox worker);
- ``upkeep/``: background components (checkpoints, retention, status, watchdog, shutdown);
- ``expectations/``: reference-expectation files, read and validated;
- ``views/``: what ``conversations``/``show``/``report`` present, and CI gating;
- ``offline/``: ``toolscore score`` and ``toolscore evaluate`` without a server;
- ``commands/``: the CLI's sub-commands (flags and formatting only; nothing imports it).

The spine at the top: ``app`` (composition of ``serve``), ``components`` (what parts plug
into), ``cli``, ``configuration`` (the option mechanism), ``settings`` and ``serve_config``
(``serve``'s options), ``errors`` (the one error-to-status map), ``logformat``.
"""
