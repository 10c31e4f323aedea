"""What people are shown: the conversations list and one conversation (``show``), the score
report (``report/``), span tables, exported evaluation rows, CI gating, and the text safety
that makes untrusted content printable.

May import: ``reconstruction`` (to explain a rebuild), storage. Never ``commands``.
"""
