// What a translated segment costs the main thread: the session's debounce, detection, cache and the model request
// through the HTTP client, with the fake model in a child process so that its own work is not counted.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { createLogger } from '../../../engine/logger.js';
import { Translator } from '../../../engine/translation/translator.js';
import { SessionTranslation, DEBOUNCE_MS } from '../../../engine/translation/session-translation.js';
import type { TranscriptSegment } from '../../../engine/audio/segment.js';
import { until } from '../../helpers/until.js';

const FAKE = fileURLToPath(new URL('../../fakes/openai-server.js', import.meta.url));

/** The fake model in a child process, answering every request with one Spanish sentence's translation. */
async function childModel(t: Test): Promise<string> {
  const code = `import(${JSON.stringify(FAKE)}).then(async (m) => { const f = await m.startFakeOpenAI(); f.fallback = { kind: 'answer', content: { items: [{ language: 'es', text: 'We went to the market.' }] } }; console.log(f.baseUrl); });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill());
  return new Promise((resolve) => child.stdout.once('data', (d: Buffer) => resolve(String(d).trim())));
}

t.test('main-thread CPU per translated segment', async (t) => {
  const baseUrl = await childModel(t);
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const counts = { requests: 0, translated: 0 };
  const translator = new Translator({
    baseUrl,
    apiKey: undefined,
    model: 'm',
    clientTimeoutMs: 30_000,
    scheduler,
    logger: createLogger('silent'),
    counters: { request: () => counts.requests++, sentence: () => undefined, segment: (o) => void (o === 'translated' && counts.translated++) },
  });
  let sent = 0;
  let stored = 0;
  let wake: (() => void) | undefined;
  const session = new SessionTranslation({
    translator,
    target: 'en',
    sessionId: 's',
    store: { updateSegmentTranslations: async (_c, items) => (stored += items.length) },
    scheduler,
    clock,
    logger: createLogger('silent'),
    send: () => {
      sent++;
      wake?.();
    },
  });
  t.teardown(() => session.dispose());
  const segment = (i: number, id = `seg-${i}`): TranscriptSegment => ({ id, text: `Fuimos al mercado número ${i} con mis padres.`, speaker: 'SPEAKER_01', speakerId: 1, isUser: false, personId: null, start: i, end: i + 1, speechProfileProcessed: false, sttProvider: 'app' });

  const one = async (i: number, id?: string): Promise<void> => {
    const answered = new Promise<void>((resolve) => (wake = resolve));
    session.segments('c', [segment(i, id)]);
    clock.advance(DEBOUNCE_MS);
    await scheduler.tick();
    await answered;
    // The round ends after its send (the store write); the next segment's timer is armed then.
    await new Promise((resolve) => setImmediate(resolve));
  };
  for (let i = 0; i < 30; i++) await one(i); // warm-up: the HTTP client's connection and code paths
  const n = 200;
  const before = process.cpuUsage();
  const started = performance.now();
  for (let i = 30; i < 30 + n; i++) await one(i);
  const used = process.cpuUsage(before);
  const us = (used.user + used.system) / n;
  t.comment(`translated segment: ${Math.round(us)} µs of main-thread CPU each (mean over ${n}, one sentence, one request each; ${((performance.now() - started) / n).toFixed(1)} ms wall)`);
  t.equal(counts.requests, 30 + n, 'one request per segment of a new sentence');
  t.equal(sent, 30 + n);
  await until(() => stored === 30 + n, { what: 'stored' });
  t.ok(us < 20_000, 'bounded');

  // The same sentences said again: answered from the node's cache, no request.
  const cachedBefore = process.cpuUsage();
  for (let i = 30; i < 30 + n; i++) await one(i, `again-${i}`);
  const cached = process.cpuUsage(cachedBefore);
  t.comment(`from the cache: ${Math.round((cached.user + cached.system) / n)} µs of main-thread CPU per segment (the loop's own timer tick and await included)`);
  t.equal(counts.requests, 30 + n, 'no request for a cached sentence');
});
