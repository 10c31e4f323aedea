"""OTLP request bodies (protobuf or OTLP/JSON) to decoded span and log records.

Pure: no I/O, no asyncio, no storage but its record vocabulary (``toolscore.storage.records``).
Owns parsing, attribute values within limits, and the per-item checks of what the database
cannot hold. May import: ``reconstruction.conversation_keys`` (which attributes are keys).
"""
