"""Reference-expectation files (YAML, JSON, Ragas JSONL): read, validated, located.

May import: the scorer (call shapes), storage's expectations room (records to import).
"""
