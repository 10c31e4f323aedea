"""Spans and log records to a conversation's transcript of ordered tool calls.

Pure: no I/O, no asyncio, no storage but its pure vocabulary (records, the JSON codec, the
user-input form). Owns the instrumentation ``conventions/``, argument decoding, tool-span
attachment, framework control calls and conversation keys. Imported by ``pipeline``, ``views``
and ``ingest``; imports no other room.
"""
