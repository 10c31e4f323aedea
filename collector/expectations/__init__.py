"""Reference expectations: files (YAML, JSON, Ragas JSONL) read, validated, located; and
``promote``, a conversation's actual calls made into an expectation (the CLI and any UI call it).

May import: the scorer (call shapes), storage's expectations room (records to import), the
pipeline and reconstruction (a conversation rebuilt as scoring rebuilds it).
"""
