"""The user's own words as the first user message, when the model saw them inside a prompt
template and the agent's invocation span recorded them as given (with that evidence only)."""

from __future__ import annotations

import json

from tests.collector.otlp_requests import load_requests, records
from tests.collector.reconstruction.test_reconstruct import span
from toolscore.collector.reconstruction.rebuild import reconstruct


def test_beeai_and_crewai_give_the_users_words() -> None:
    """Each turn is one user message in the user's words, though the model saw it wrapped
    ('Your task: ...', 'Current Task: ...') and a later history gives it bare."""
    for name in ("beeai-openinference", "crewai-openinference"):
        recording = load_requests(name)
        result = reconstruct(*records(recording.requests))
        assert result.first_user_message == recording.user_input, name
        humans = [m["content"] for m in result.messages if m["type"] == "human"]
        assert humans[0] == recording.user_input and len(humans) == 2, (name, humans)


def _chat(text: str) -> object:
    return span("chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": text}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}])},
        start=10)  # fmt: skip


def test_an_agent_input_the_prompt_does_not_contain_is_not_taken() -> None:
    given = json.dumps({"input": "Book a table"})
    agent = span("agent", {"openinference.span.kind": "AGENT", "input.value": given}, start=1)
    result = reconstruct([agent, _chat("Task: What's the weather?")])
    assert result.first_user_message == "Task: What's the weather?"
    wrapped = reconstruct([agent, _chat("Your task: Book a table\nBe brief.")])
    assert wrapped.first_user_message == "Book a table"
