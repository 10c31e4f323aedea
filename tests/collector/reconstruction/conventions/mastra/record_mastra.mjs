// Records real Mastra spans (@mastra/core Agent + @mastra/otel-exporter) into the toolscore
// recording JSON form. Run by tests/collector/reconstruction/conventions/record_mastra.py, which starts the
// scripted chat-completions server and passes its URL; by hand:
//   cd tests/collector/reconstruction/conventions/mastra && npm install
//   node record_mastra.mjs SERVER_URL OUT.json SCENARIO_JSON
// SCENARIO_JSON: {"questions": [...], "thread": "..."}. The agent uses Mastra's own model router
// (an OpenAI-compatible config pointed at SERVER_URL); the tools run for real. The OtelExporter
// is given an in-memory SpanExporter, so the spans are exactly what it would send over OTLP.
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { Observability } from '@mastra/observability';
import { OtelExporter } from '@mastra/otel-exporter';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { writeFileSync } from 'node:fs';
import { z } from 'zod';

const [url, out, scenarioJson] = process.argv.slice(2);
const scenario = JSON.parse(scenarioJson);
const memory = new InMemorySpanExporter();

const tools = {
  get_weather: createTool({
    id: 'get_weather', description: 'Current weather for a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `18C in ${city}`,
  }),
  get_time: createTool({
    id: 'get_time', description: 'Local time in a timezone.',
    inputSchema: z.object({ timezone: z.string() }),
    execute: async ({ timezone }) => `09:00 in ${timezone}`,
  }),
  book_table: createTool({
    id: 'book_table', description: 'Book a restaurant table.',
    inputSchema: z.object({
      booking: z.object({ restaurant: z.string(), when: z.object({ day: z.string(), hour: z.number().int() }) }),
      party_size: z.number().int(),
    }),
    execute: async ({ booking, party_size }) =>
      `booked ${booking.restaurant} for ${party_size} on ${booking.when.day} at ${booking.when.hour}:00`,
  }),
  convert_currency: createTool({
    id: 'convert_currency', description: 'Convert an amount of euros to another currency.',
    inputSchema: z.object({ amount: z.number(), currency: z.string() }),
    execute: async ({ amount, currency }) => `${(amount * 162).toFixed(1)} ${currency}`,
  }),
};

const agent = new Agent({
  id: 'travel-agent', name: 'travel-agent', instructions: 'You help travellers.',
  model: { id: 'openai/gpt-4o', url, apiKey: 'test', api: 'chat' },
  tools,
});
// a provider must resolve for the exporter to start; its endpoint is never used (the span exporter
// is given, and logs are off: Mastra's log records carry no conversation content)
const exporter = new OtelExporter({
  exporter: memory,
  provider: { custom: { endpoint: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf' } },
  signals: { logs: false },
});
const mastra = new Mastra({
  agents: { travel: agent },
  observability: new Observability({ configs: { otel: { serviceName: 'mastra-app', exporters: [exporter] } } }),
  logger: false,
});

const travel = mastra.getAgent('travel');
const messages = [];
const answers = [];
for (const question of scenario.questions) {
  messages.push({ role: 'user', content: question });
  const result = await travel.generate(messages, {
    maxSteps: 5, tracingOptions: { metadata: { threadId: scenario.thread } },
  });
  messages.push(...result.response.messages);
  answers.push(result.text);
}
// spans reach the exporter asynchronously; flush (not shutdown: that empties the memory exporter)
await new Promise((resolve) => setTimeout(resolve, 500));
await exporter.flush();

const toNs = ([s, ns]) => (BigInt(s) * 1000000000n + BigInt(ns)).toString();
const spans = memory.getFinishedSpans().map((s) => ({
  trace_id: s.spanContext().traceId, span_id: s.spanContext().spanId,
  parent_span_id: s.parentSpanContext?.spanId ?? null, name: s.name, kind: s.kind + 1,
  start_ns: toNs(s.startTime), end_ns: toNs(s.endTime), status_code: s.status.code,
  attributes: s.attributes, resource: s.resource.attributes, scope: s.instrumentationScope.name,
  events: s.events.map((e) => ({ name: e.name, time_ns: toNs(e.time), attributes: e.attributes ?? {} })),
}));
writeFileSync(out, JSON.stringify({ answers, spans }, null, 1) + '\n');
await exporter.shutdown();
