// The LLM processor against a local fake of the chat-completions endpoint over a real socket: good answers, bad answers, errors, timeouts.
import t, { type Test } from 'tap';
import { Writable } from 'node:stream';
import { LlmProcessor } from '../../../engine/processing/llm.js';
import { createProcessor } from '../../../engine/processing/index.js';
import { BuiltinProcessor } from '../../../engine/processing/builtin.js';
import { createLogger } from '../../../engine/logger.js';
import type { ProcessInput } from '../../../engine/processing/types.js';
import { startFakeOpenAI, type FakeOpenAI } from '../../fakes/openai-server.js';
import { until } from '../../helpers/until.js';

const SECRET_TEXT = 'Remind me to call the dentist tomorrow at 3pm about my wisdom tooth.';

const input = (over: Partial<ProcessInput> = {}): ProcessInput => ({
  segments: [{ text: SECRET_TEXT, start: 0, end: 5 }],
  textSource: 'audio_transcript',
  language: 'en',
  startedAt: '2026-11-23T12:00:00.000Z',
  finishedAt: '2026-11-23T12:05:00.000Z',
  allowDiscard: true,
  ...over,
});

const GOOD = {
  discard: false,
  title: 'Dentist Appointment Reminder',
  overview: 'The user wants a reminder to call the dentist.',
  emoji: '🦷',
  category: 'health',
  action_items: [{ description: 'Call the dentist', due_at: '2026-11-24T15:00:00Z' }],
  events: [{ title: 'Dentist call', description: 'Call about the wisdom tooth', start: '2026-11-24T15:00:00+00:00', duration: 15 }],
  memories: [{ content: 'User has a wisdom tooth problem.', category: 'core' }],
};

/** A logger whose lines the test can read, to check that no content is logged. */
function captureLogger(): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: createLogger('warn', dest as never), lines };
}

async function setup(t: Test, over: { timeoutMs?: number; maxRetries?: number } = {}): Promise<{ fake: FakeOpenAI; proc: LlmProcessor; lines: string[] }> {
  const fake = await startFakeOpenAI({ apiKey: 'sk-test' });
  t.teardown(() => fake.close());
  const { logger, lines } = captureLogger();
  const proc = new LlmProcessor({ baseUrl: fake.baseUrl, apiKey: 'sk-test', model: 'test-model', timeoutMs: over.timeoutMs ?? 2000, maxRetries: over.maxRetries ?? 0, logger });
  return { fake, proc, lines };
}

t.test('a good answer becomes the result', async (t) => {
  const { fake, proc } = await setup(t);
  fake.script({ kind: 'answer', content: GOOD });
  const r = await proc.process(input());
  t.equal(r.producedBy, 'llm');
  t.equal(r.discarded, false);
  t.match(r.structured, { title: 'Dentist Appointment Reminder', category: 'health', emoji: '🦷' });
  t.same(r.structured.actionItems, [{ description: 'Call the dentist', dueAt: '2026-11-24T15:00:00.000Z' }], 'due time normalised to UTC');
  t.same(r.structured.events[0], { title: 'Dentist call', description: 'Call about the wisdom tooth', start: '2026-11-24T15:00:00.000Z', duration: 15 });
  t.same(r.memories, [{ content: 'User has a wisdom tooth problem.', category: 'core' }]);

  t.equal(fake.requests.length, 1);
  const req = fake.requests[0]!;
  t.equal(req.authorization, 'Bearer sk-test');
  t.equal(req.body.model, 'test-model');
  t.equal(req.body.messages[0].role, 'system');
  t.equal(req.body.messages[1].content, SECRET_TEXT, 'the transcript is the user message');
  t.equal(req.body.response_format.type, 'json_schema');
  t.equal(req.body.response_format.json_schema.strict, true);
  t.ok(req.body.response_format.json_schema.schema.properties.category.enum.includes('other'));
});

t.test('a discard answer empties the structure, unless discarding is not allowed', async (t) => {
  const { fake, proc } = await setup(t);
  fake.script({ kind: 'answer', content: { ...GOOD, discard: true, title: '' } }, { kind: 'answer', content: { ...GOOD, discard: true } });
  const r = await proc.process(input());
  t.equal(r.discarded, true);
  t.equal(r.structured.emoji, '🧠');
  t.same(r.memories, []);
  const external = await proc.process(input({ allowDiscard: false, textSource: 'other_text' }));
  t.equal(external.discarded, false, 'external text is never discarded');
  t.equal(external.structured.title, 'Dentist Appointment Reminder');
  t.match(fake.requests[1]!.body.messages[0].content, /Never discard/);
});

t.test('unusable answers fall back to the built-in extractor', async (t) => {
  const { fake, proc, lines } = await setup(t);
  const bad: Array<[string, Parameters<FakeOpenAI['script']>[0]]> = [
    ['not JSON', { kind: 'raw', content: 'Sure! Here is the summary: {title: Dentist' }],
    ['empty content', { kind: 'raw', content: '' }],
    ['unknown category', { kind: 'answer', content: { ...GOOD, category: 'dentistry' } }],
    ['wrong type', { kind: 'answer', content: { ...GOOD, title: 42 } }],
    ['missing field', { kind: 'answer', content: { ...GOOD, memories: undefined } }],
    ['unknown memory category', { kind: 'answer', content: { ...GOOD, memories: [{ content: 'x', category: 'gossip' }] } }],
    ['bad date', { kind: 'answer', content: { ...GOOD, events: [{ ...GOOD.events[0], start: 'tomorrow' }] } }],
    ['extra field', { kind: 'answer', content: { ...GOOD, mood: 'happy' } }],
    ['a JSON array', { kind: 'answer', content: [GOOD] }],
  ];
  const builtin = await new BuiltinProcessor().process(input());
  for (const [name, step] of bad) {
    fake.script(step);
    const r = await proc.process(input());
    t.equal(r.producedBy, 'builtin-fallback', name);
    t.same(r.structured, builtin.structured, `${name}: the built-in result`);
  }
  t.ok(lines.length >= bad.length, 'each fallback is logged');
  t.notOk(lines.join('').includes('dentist'), 'logs never carry the transcript');
});

t.test('5xx after the retries falls back; a retry that succeeds does not', async (t) => {
  const { fake, proc } = await setup(t, { maxRetries: 1 });
  fake.script({ kind: 'status', status: 500, headers: { 'retry-after-ms': '5' } }, { kind: 'status', status: 503, headers: { 'retry-after-ms': '5' } });
  const r = await proc.process(input());
  t.equal(r.producedBy, 'builtin-fallback');
  t.equal(fake.requests.length, 2, 'one retry');
  fake.script({ kind: 'status', status: 502, headers: { 'retry-after-ms': '5' } }, { kind: 'answer', content: GOOD });
  const ok = await proc.process(input());
  t.equal(ok.producedBy, 'llm');
});

t.test('429 with retry-after is retried', async (t) => {
  const { fake, proc } = await setup(t, { maxRetries: 2 });
  fake.script({ kind: 'status', status: 429, headers: { 'retry-after': '0.01' } }, { kind: 'answer', content: GOOD });
  const r = await proc.process(input());
  t.equal(r.producedBy, 'llm');
  t.equal(fake.requests.length, 2);
});

t.test('a wrong API key falls back without retrying', async (t) => {
  const fake = await startFakeOpenAI({ apiKey: 'sk-right' });
  t.teardown(() => fake.close());
  const { logger } = captureLogger();
  const proc = new LlmProcessor({ baseUrl: fake.baseUrl, apiKey: 'sk-wrong', model: 'm', timeoutMs: 2000, maxRetries: 2, logger });
  const r = await proc.process(input());
  t.equal(r.producedBy, 'builtin-fallback');
});

t.test('an answer slower than the timeout falls back', async (t) => {
  const { fake, proc } = await setup(t, { timeoutMs: 200, maxRetries: 0 });
  fake.script({ kind: 'hold' });
  const started = Date.now();
  const r = await proc.process(input());
  t.equal(r.producedBy, 'builtin-fallback');
  t.ok(Date.now() - started < 5000, 'gave up after the timeout');
});

t.test('an aborted signal rejects instead of falling back', async (t) => {
  const { fake, proc } = await setup(t);
  fake.script({ kind: 'hold' });
  const ac = new AbortController();
  const pending = proc.process(input(), ac.signal);
  await until(() => fake.requests.length > 0, { what: 'the request at the fake' });
  const reason = new Error('client went away');
  ac.abort(reason);
  t.equal(await pending.then(() => undefined, (err: unknown) => err), reason, 'rejects with the abort reason');
  const already = new AbortController();
  already.abort();
  await t.rejects(proc.process(input(), already.signal));
});

t.test('an empty transcript is decided without a request', async (t) => {
  const { fake, proc } = await setup(t);
  const r = await proc.process(input({ segments: [] }));
  t.equal(r.discarded, true);
  t.equal(fake.requests.length, 0);
});

t.test('createProcessor picks by configuration', async (t) => {
  const logger = createLogger('silent');
  const base = { llmApiKey: undefined, llmModel: 'm', llmTimeoutMs: 1000, llmMaxRetries: 0 };
  t.ok((await createProcessor({ ...base, llmBaseUrl: undefined }, logger)) instanceof BuiltinProcessor);
  t.ok((await createProcessor({ ...base, llmBaseUrl: 'http://127.0.0.1:1/v1' }, logger)) instanceof LlmProcessor);
});
