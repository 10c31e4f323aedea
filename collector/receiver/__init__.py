"""OTLP receivers: gRPC (:mod:`.grpc_server`) and HTTP (:mod:`.http_server`) over one core.

Owns transports, admission (body sizes, request slots, read gates, auth) and the answers they
give (statuses come from :mod:`toolscore.collector.errors`). May import: ``otlp``, ``ingest``,
the spine's settings and errors.
"""
