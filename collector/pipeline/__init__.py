"""From stored spans to scores: conversation bookkeeping, completion, claiming and scoring.

- ``assign``: which conversation each trace belongs to (run inside each ingest transaction);
- ``hook``: the ``IngestHook`` wrapping it;
- ``claim``: when a conversation is complete, and claiming it in the database;
- ``loading``: the telemetry scoring reads, a part bounded in text as it is loaded;
- ``score``: reconstruct, match, score and write the evaluation history;
- ``rounds``: one round, blocking (claim, score, write), and the outcome counters;
- ``child``: rounds in a child process (``ScoringProcess``);
- ``worker``: the ``serve`` component that ties claim and score together;
- ``rescoring``: ``toolscore rescore``'s use case; ``not_evaluated``: metrics given no score.

May import: ``reconstruction``, ``ingest`` (hooks), the scorer, storage.
"""
