"""What a span's attribute keys show, read once per key set.

Several readers scan every key of a span for a prefix (OpenLLMetry's ``traceloop.*`` keys, the
flattened legacy ``gen_ai.prompt.{i}.*`` messages, tool definitions), and every span is offered
to several of them. Spans of one shape (one instrumentation's model or tool spans) carry the same
keys, so a key set is classified once: the bits below, remembered by the keys in their order.
"""

from __future__ import annotations

from toolscore.storage.records import Attributes

__all__ = [
    "DEFINITION_KEY_PREFIXES",
    "FLAT_COMPLETION",
    "FLAT_PROMPT",
    "TOOL_DEFINITION",
    "TRACELOOP_KEY",
    "key_facts",
]

TRACELOOP_KEY = 1  # a key under ``traceloop.`` (OpenLLMetry's own)
FLAT_PROMPT = 2  # ``gen_ai.prompt.*``: legacy input messages, flattened
FLAT_COMPLETION = 4  # ``gen_ai.completion.*``: legacy output messages, flattened
TOOL_DEFINITION = 8  # a key of the tools offered to the model (conventions/definitions.py)

DEFINITION_KEY_PREFIXES = (
    "gen_ai.tool.definitions",
    "ai.prompt.tools",
    "llm.tools",
    "llm.request.functions",
    "tool.json_schema",
)

# The keys are the senders' to choose: the memo stays bounded, and a long key set (a model span
# with its messages flattened, different in every call) is classified without being kept.
_MAX_KEY_SETS = 4096
_MAX_KEPT_KEYS = 64
_FACTS: dict[tuple[str, ...], int] = {}


def key_facts(attrs: Attributes) -> int:
    """The bits above that ``attrs``' keys show."""
    keys = tuple(attrs)
    facts = _FACTS.get(keys)
    if facts is not None:
        return facts
    facts = 0
    for key in keys:
        facts |= _key_fact(key)
    if len(keys) <= _MAX_KEPT_KEYS and len(_FACTS) < _MAX_KEY_SETS:
        _FACTS[keys] = facts
    return facts


def _key_fact(key: str) -> int:
    fact = 0
    if key.startswith("traceloop."):
        fact |= TRACELOOP_KEY
    if key.startswith("gen_ai.prompt."):
        fact |= FLAT_PROMPT
    elif key.startswith("gen_ai.completion."):
        fact |= FLAT_COMPLETION
    if key.startswith(DEFINITION_KEY_PREFIXES):
        fact |= TOOL_DEFINITION
    return fact
