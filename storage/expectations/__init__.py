"""Reference expectations: the versioned ``expectations`` table, importing new versions,
lookups by id, conversation id and user input.

May import: ``plumbing``, ``conversations`` (the user-input form).
"""
