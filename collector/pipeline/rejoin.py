"""Keyless traces that arrive before the conversation they continue (``assign``'s replay rule).

A trace whose first model call replays model output but that joined nothing (the turn it
continues has not arrived: another server, an out-of-order export, log records still on their
way) is its own conversation and leaves *heads*: its replayed states, stored in
``replay_tails`` under fingerprints marked ``^``. A later trace leaving one of those states
takes that waiting conversation in whole, with the traces that joined it (as a keyless
conversation named later moves whole), within the replay window. The waiting conversations are
looked up with the states the batch's traces replay (one statement), before the batch's traces
are locked, and locked with them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from toolscore.storage.conversations.assignments import TraceState, conversations_of
from toolscore.storage.database import Connection

HEAD = "^"  # marks a head among replay_tails' fingerprints (the states are hex)


def heads(replayed: Iterable[str], conversation_id: str) -> dict[str, str]:
    """The rows a conversation waiting for the states ``replayed`` leaves."""
    return {HEAD + state: conversation_id for state in replayed}


def waited(tails: Iterable[str]) -> list[str]:
    """The fingerprints to look up for conversations waiting for the states ``tails``."""
    return [HEAD + t for t in tails]


def waiting(conn: Connection, found: Mapping[str, str], batch: Collection[str]) -> dict[str, str]:
    """state -> the keyless conversation (keyed by its first trace, not in ``batch``) waiting
    for a trace that leaves it; ``found``: what ``latest_tails`` found (heads among others)."""
    waits = {f[len(HEAD) :]: c for f, c in found.items() if f.startswith(HEAD) and c not in batch}
    if not waits:
        return {}
    still = conversations_of(conn, sorted(set(waits.values())))  # not moved or named since
    return {state: c for state, c in waits.items() if still.get(c) == c}


def taken(
    waits: Mapping[str, str], tails: Mapping[str, str], states: Mapping[str, TraceState]
) -> dict[str, str]:
    """Waiting conversation -> the conversation that takes it: the one left in the state it
    waits for (``tails``: state -> conversation), if it still waits now its row is locked."""
    out: dict[str, str] = {}
    for tail, conversation in sorted(tails.items()):
        waiter = waits.get(tail)
        state = states.get(waiter or "")
        if waiter is None or waiter == conversation or state is None:
            continue
        if state.conversation_id == waiter:
            out.setdefault(waiter, conversation)
    return out
