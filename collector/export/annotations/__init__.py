"""Annotation targets of the write-back: scores as the backend's own annotations.

- ``targets``: ``--annotate KIND=URL`` and the credentials each backend's SDK reads;
- ``content``: what one evaluation says as an annotation (name, label, score, explanation, ids);
- ``phoenix``: span, trace and session annotations (Phoenix's REST API);
- ``langfuse``: scores with a deterministic id (Langfuse's public API);
- ``worker``: the ``AnnotationWorker`` component, delivering through the outbox
  (``storage/history/deliveries.py``) with aiohttp.
"""
