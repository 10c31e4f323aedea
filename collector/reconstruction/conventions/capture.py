"""How to turn content capture on, per convention: the sentence a ``not_evaluated`` evaluation
gives when a call's arguments were not recorded (docs/conventions.md, pitfall 6).

Each switch is the one the instrumentation's own source reads (the variable or option that hides
tool arguments, and its default); the span's instrumentation scope tells apart libraries that
share a convention (OpenTelemetry's GenAI instrumentations and OpenLLMetry, say).
"""

from __future__ import annotations

OTEL_GENAI = (
    "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (OpenTelemetry's GenAI "
    "instrumentations record message content and tool arguments only with it)"
)
OPENLLMETRY = (
    "set TRACELOOP_TRACE_CONTENT=true (OpenLLMetry / Traceloop leave prompts, completions and "
    "tool arguments out when it is false)"
)
OPENAI_AGENTS = (
    "run the OpenAI Agents SDK with trace_include_sensitive_data=True (RunConfig, or "
    "OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=true): without it function spans carry no input"
)
OPENINFERENCE = (
    "unset OPENINFERENCE_HIDE_INPUTS, OPENINFERENCE_HIDE_OUTPUTS and "
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES (or TraceConfig(hide_inputs=False, ...)): OpenInference "
    "leaves tool inputs and the model's tool calls out when they are true"
)
PYDANTIC_AI = (
    "instrument Pydantic AI with include_content=True (InstrumentationSettings or "
    "logfire.instrument_pydantic_ai): with include_content=False tool calls keep only their names"
)
VERCEL_AI = (
    "pass experimental_telemetry: { isEnabled: true, recordInputs: true, recordOutputs: true } "
    "to the AI SDK call"
)
GOOGLE_ADK = (
    "set ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=true (ADK 1.x spans) or "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (ADK 2.x log records)"
)
HAYSTACK = "set HAYSTACK_CONTENT_TRACING_ENABLED=true (Haystack traces inputs only with it)"
GENERIC = "turn on the instrumentation's content capture (message content and tool arguments)"

_BY_CONVENTION = {
    "openllmetry": OPENLLMETRY,
    "logfire_openai_agents": OPENAI_AGENTS,
    "pydantic_ai": PYDANTIC_AI,
    "vercel_ai": VERCEL_AI,
    "google_adk": GOOGLE_ADK,
    "haystack": HAYSTACK,
}


def capture_hint(convention: str, scope: str | None) -> str:
    """How to record the arguments of a call read by ``convention`` from a span of ``scope``."""
    scope = scope or ""
    if scope == "openinference.instrumentation.openai_agents":
        return OPENAI_AGENTS
    if convention in ("openinference", "smolagents"):
        return OPENINFERENCE
    if convention in _BY_CONVENTION:
        return _BY_CONVENTION[convention]
    if convention in ("otel_genai", "otel_genai_events"):
        if "traceloop" in scope:
            return OPENLLMETRY
        if scope.startswith("opentelemetry.instrumentation.") and not scope.endswith("_v2"):
            # OpenLLMetry's instrumentations share this prefix with OpenTelemetry's own (whose
            # GenAI packages are the ``*_v2`` ones and google_genai / vertexai): say both
            return f"{OTEL_GENAI}, or {OPENLLMETRY}"
        return OTEL_GENAI
    return GENERIC
