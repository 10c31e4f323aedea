"""The load of bench_ingest.py: realistic GenAI agent traces in 512-span OTLP requests.

Each trace is 7 spans (an agent span, four tool spans, two chat spans; ~1.5 KB per span on
average with message content), serialised before the benchmark's clock starts.
"""

from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

SPANS_PER_TRACE = 7
BATCH = 512

SYSTEM = (
    "You are a travel agent. Use the tools to check facts before answering; never invent "
    "opening hours, prices or timetables. Prefer walking routes and public transport, keep "
    "answers under 120 words, and ask one clarifying question when dates are missing."
)
USER = (
    "I am planning a three-day trip to Lisbon next month with my partner. We like food, "
    "architecture and walking. Could you check the weather for those days, find two "
    "restaurants near Alfama that serve vegetarian dishes, and tell me how long the tram 28 "
    "ride takes from Martim Moniz to Prazeres? Please keep it short."
)
ASSISTANT = (
    "Here is a plan: the forecast shows 22-25 °C and sun; Alfama has Ao 26 Vegan Food Project "
    "and Pois Café; tram 28 takes about 40 minutes end to end."
)


def _kv(key: str, value: str | int | float) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(double_value=value))


def _trace_spans(trace_no: int, run: int) -> list[Span]:
    """One agent trace: agent span, two chat spans, four tool spans (~1.5 KB each on average)."""
    trace_id = ((run << 64) | trace_no).to_bytes(16, "big")
    base = trace_no * 16
    start = 1_700_000_000_000_000_000 + trace_no * 1_000_000
    conv = f"conv-{run}-{trace_no // 3}"
    messages = json.dumps(
        [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
         {"role": "user", "parts": [{"type": "text", "content": USER}]}]
    )  # fmt: skip
    output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ASSISTANT}]}])
    common = [_kv("gen_ai.conversation.id", conv), _kv("gen_ai.agent.name", "travel-planner")]
    spans = [
        Span(trace_id=trace_id, span_id=(base + 1).to_bytes(8, "big"), name="invoke_agent travel",
             kind=1, start_time_unix_nano=start, end_time_unix_nano=start + 9_000_000,
             attributes=[*common, _kv("gen_ai.operation.name", "invoke_agent"),
                         _kv("gen_ai.input.messages", messages),
                         _kv("gen_ai.output.messages", output)]),
    ]  # fmt: skip
    for i, tool in enumerate(["get_weather", "find_restaurants", "find_restaurants", "route"]):
        args = json.dumps({"city": "Lisbon", "area": "Alfama", "diet": "vegetarian", "n": i})
        items = [f"result {i}-{k}: " + "lorem ipsum " * 20 for k in range(5)]
        result = json.dumps({"ok": True, "items": items})
        spans.append(
            Span(trace_id=trace_id, span_id=(base + 2 + i).to_bytes(8, "big"),
                 parent_span_id=(base + 1).to_bytes(8, "big"), name=f"execute_tool {tool}",
                 kind=1, start_time_unix_nano=start + (i + 1) * 1_000_000,
                 end_time_unix_nano=start + (i + 1) * 1_000_000 + 500_000,
                 attributes=[*common, _kv("gen_ai.operation.name", "execute_tool"),
                             _kv("gen_ai.tool.name", tool), _kv("gen_ai.tool.call.id", f"call_{i}"),
                             _kv("gen_ai.tool.call.arguments", args),
                             _kv("gen_ai.tool.call.result", result)])
        )  # fmt: skip
    for i in range(2):
        spans.append(
            Span(trace_id=trace_id, span_id=(base + 6 + i).to_bytes(8, "big"),
                 parent_span_id=(base + 1).to_bytes(8, "big"), name="chat gpt-4o", kind=3,
                 start_time_unix_nano=start + 6_000_000 + i, end_time_unix_nano=start + 8_000_000,
                 attributes=[*common, _kv("gen_ai.operation.name", "chat"),
                             _kv("gen_ai.request.model", "gpt-4o"),
                             _kv("gen_ai.usage.input_tokens", 812),
                             _kv("gen_ai.usage.output_tokens", 96),
                             _kv("gen_ai.request.temperature", 0.2),
                             _kv("gen_ai.input.messages", messages),
                             _kv("gen_ai.output.messages", output)])
        )  # fmt: skip
    return spans


def build_requests(total_spans: int, run: int) -> list[bytes]:
    """Serialised 512-span requests (traces may straddle two requests, as SDK batches do)."""
    spans: list[Span] = []
    trace_no = 0
    while len(spans) < total_spans:
        trace_no += 1
        spans.extend(_trace_spans(trace_no, run))
    spans = spans[:total_spans]
    out = []
    for i in range(0, len(spans), BATCH):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.append(_kv("service.name", "travel-agent"))
        ss = rs.scope_spans.add()
        ss.scope.name = "opentelemetry.instrumentation.genai"
        ss.spans.extend(spans[i : i + BATCH])
        out.append(req.SerializeToString())
    return out
