"""One module per CLI sub-command; each exposes ``register(subparsers)``.

Flags and formatting only: the work is in the rooms. Nothing imports this room but ``cli``.
"""
