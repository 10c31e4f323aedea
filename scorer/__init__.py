"""toolscore scoring core: pure functions, no I/O, no async."""
