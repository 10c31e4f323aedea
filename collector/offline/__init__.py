"""The offline batch engine of ``toolscore score``: JSON Lines of Ragas samples in, one JSON
line per sample out, in order, at tens of thousands of samples a second.

- :mod:`.reader`: what the input is (JSON Lines, one document, a wrapper) and its blocks of lines;
- :mod:`.job`: scoring a block, line by line (``scorer.rows.score_row``);
- :mod:`.forking`: sharing a block among forked processes whose output keeps the input's order;
- :mod:`.engine`: :func:`~toolscore.collector.offline.engine.run`, which ties them together;
- :mod:`.progress`: the one-line progress report on a terminal.
"""
