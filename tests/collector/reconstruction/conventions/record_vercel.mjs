// Records real Vercel AI SDK (ai@6) spans into the toolscore recording JSON form (run by hand):
//   cd $(mktemp -d) && npm install ai@6 zod @opentelemetry/api @opentelemetry/sdk-trace-base \
//     @opentelemetry/context-async-hooks && cp .../record_vercel.mjs . &&
//   node record_vercel.mjs OUT.json parallel|multi-turn
// A MockLanguageModelV3 (from ai/test) requests tool calls, then answers; the tools run for real.
import { generateText, tool, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { writeFileSync } from 'node:fs';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('ai');
const usage = { inputTokens: { total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };

function scripted(steps) {
  let n = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const step = steps[Math.min(n++, steps.length - 1)];
      if (typeof step === 'string') {
        return { content: [{ type: 'text', text: step }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      }
      return {
        content: step.map(([toolName, input, toolCallId]) => ({ type: 'tool-call', toolCallId, toolName, input })),
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      };
    },
  });
}
const tools = {
  get_weather: tool({ description: 'Weather', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `18C in ${city}` }),
  get_time: tool({ description: 'Time', inputSchema: z.object({ timezone: z.string() }), execute: async ({ timezone }) => `09:00 in ${timezone}` }),
};
const scenario = process.argv[3];
if (scenario === 'parallel') {
  await generateText({
    model: scripted([[['get_weather', '{"city":"Paris"}', 'call_w1'], ['get_time', '{"timezone":"Asia/Tokyo"}', 'call_t2']], '18C and 09:00']),
    tools, stopWhen: stepCountIs(5),
    prompt: "What's the weather in Paris and the time in Tokyo?",
    experimental_telemetry: { isEnabled: true, tracer, functionId: 'weather-agent', metadata: { sessionId: 'sess-vercel' } },
  });
} else {
  const model = scripted([[['get_weather', '{"city":"Paris"}', 'c1']], '18C', [['get_time', '{"timezone":"Asia/Tokyo"}', 'c2']], '09:00']);
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const telemetry = { isEnabled: true, tracer, functionId: 'weather-agent', metadata: { sessionId: 'sess-vercel-mt' } };
  const first = await generateText({ model, tools, stopWhen: stepCountIs(5), messages, experimental_telemetry: telemetry });
  messages.push(...first.response.messages, { role: 'user', content: 'And the time in Tokyo?' });
  await generateText({ model, tools, stopWhen: stepCountIs(5), messages, experimental_telemetry: telemetry });
}
const toNs = ([s, ns]) => (BigInt(s) * 1000000000n + BigInt(ns)).toString();
const spans = exporter.getFinishedSpans().map((s) => ({
  trace_id: s.spanContext().traceId, span_id: s.spanContext().spanId,
  parent_span_id: s.parentSpanContext?.spanId ?? null, name: s.name, kind: s.kind + 1,
  start_ns: toNs(s.startTime), end_ns: toNs(s.endTime), status_code: s.status.code,
  attributes: s.attributes, resource: s.resource.attributes, scope: s.instrumentationScope.name,
  events: s.events.map((e) => ({ name: e.name, time_ns: toNs(e.time), attributes: e.attributes ?? {} })),
}));
writeFileSync(process.argv[2], JSON.stringify({ _note: `Recorded from the Vercel AI SDK (ai@6, MockLanguageModelV3) by record_vercel.mjs; ${scenario}.`, spans, logs: [], expected_tool_calls: [{ name: 'get_weather', args: { city: 'Paris' } }, { name: 'get_time', args: { timezone: 'Asia/Tokyo' } }] }, null, 1) + '\n');
