"""Database plumbing: engines and connections, the dialect differences (the only modules that
ask which database it is), call deadlines, write-fault classes, URLs without secrets, JSON
codec, zstd (de)compressors and storable values, questions about the SQLite file.

May import: the scorer's nothing; no other storage room.
"""
