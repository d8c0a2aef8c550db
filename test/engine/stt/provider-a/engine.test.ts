// provider_a (Deepgram live protocol) against the Deepgram fake over real sockets; time moves only through the ManualClock.
import { until } from '../../../helpers/until.js';
import { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { ManualClock } from '../../../../engine/clock.js';
import { createLogger } from '../../../../engine/logger.js';
import { Scheduler } from '../../../../engine/scheduler.js';
import { ProviderAEngine, type ProviderAEngineOptions } from '../../../../engine/stt/provider-a/engine.js';
import type { SendPlan, SocketHost, SttFailure, SttSegment, SttStream } from '../../../../engine/stt/types.js';
import { SttOpenError } from '../../../../engine/stt/types.js';
import { socketHere } from '../../../../engine/codec/uplink.js';
import { startFakeDeepgram, type ScriptedWord } from '../../../fakes/deepgram-server.js';
import { freePort } from '../../../helpers/ports.js';

const RATE = 16000;
const opts = { language: 'en', sampleRateHz: 16000 as const, sessionId: 'sess-1' };

/** Audio whose every sample says where it is, so a kept tail can be checked sample for sample. */
function ramp(seconds: number, fromSample = 0): Int16Array {
  return Int16Array.from({ length: Math.round(seconds * RATE) }, (_, i) => ((fromSample + i) % 32000) - 16000);
}

function frames(pcm: Int16Array, ms = 20): Int16Array[] {
  const n = (RATE * ms) / 1000;
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += n) out.push(pcm.subarray(i, i + n));
  return out;
}

const word = (w: string, speaker: number, start: number, end: number, punctuated = w): ScriptedWord => ({ word: w, punctuated_word: punctuated, speaker, start, end });

async function setup(t: Test, over: Partial<ProviderAEngineOptions> = {}) {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  const fake = await startFakeDeepgram({ clock, sweepEveryMs: 0 });
  const lines: string[] = [];
  const logger = createLogger('debug', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) as never);
  const engine = new ProviderAEngine({ url: fake.url, apiKey: 'test-key', clock, scheduler, logger, keyterms: ['Omi', 'two words', 'Omi', ' '], ...over });
  t.teardown(async () => {
    await fake.close();
    await engine.close();
    scheduler.close();
  });
  return { clock, scheduler, fake, engine, lines };
}

/** The SttFailure an open() rejected with (undefined when it opened). */
const failureOf = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => (e instanceof SttOpenError ? e.failure : e));

function collect(stream: SttStream) {
  const segments: SttSegment[] = [];
  const failures: SttFailure[] = [];
  stream.on('segments', (s) => segments.push(...s));
  stream.on('failure', (f) => failures.push(f));
  return { segments, failures };
}

t.test('scripted words come back as segments grouped by speaker; the query carries the live options Deepgram is asked for', async (t) => {
  const { fake, engine, lines } = await setup(t);
  fake.script({
    kind: 'accept',
    results: [
      { afterS: 1, words: [word('hello', 0, 0.1, 0.4, 'Hello,'), word('there', 0, 0.45, 0.8, 'there.'), word('hi', 1, 0.85, 0.95, 'Hi.')] },
      { afterS: 2, words: [] },
      { afterS: 2.5, words: [word('bye', 2, 2.1, 2.3, 'Bye.')] },
    ],
  });
  const stream = await engine.open(opts);
  const { segments, failures } = collect(stream);
  for (const f of frames(ramp(2.5), 100)) stream.write(f);
  await until(() => segments.length === 3, { what: 'three segments' });
  t.same(segments, [
    { speaker: 'SPEAKER_00', text: 'Hello, there.', start: 0.1, end: 0.8, words: [{ word: 'Hello,', start: 0.1, end: 0.4 }, { word: 'there.', start: 0.45, end: 0.8 }] },
    { speaker: 'SPEAKER_01', text: 'Hi.', start: 0.85, end: 0.95, words: [{ word: 'Hi.', start: 0.85, end: 0.95 }] },
    { speaker: 'SPEAKER_02', text: 'Bye.', start: 2.1, end: 2.3, words: [{ word: 'Bye.', start: 2.1, end: 2.3 }] },
  ]);
  const s = fake.streams[0]!;
  t.equal(s.headers.authorization, 'Token test-key');
  const q = Object.fromEntries([...s.query].filter(([k]) => k !== 'keyterm'));
  t.same(q, {
    model: 'nova-3', language: 'en', encoding: 'linear16', sample_rate: '16000', channels: '1', multichannel: 'false', punctuate: 'true',
    smart_format: 'true', diarize: 'true', no_delay: 'true', endpointing: '300', interim_results: 'false', profanity_filter: 'false', filler_words: 'false',
  });
  t.same(s.query.getAll('keyterm'), ['Omi', 'two words'], 'key terms trimmed and de-duplicated');
  t.same([s.bytes, s.chunks, s.minChunkBytes, s.maxChunkBytes, s.oddChunks], [2.5 * RATE * 2, 25, 3200, 3200, 0], 'one message per write, whole samples');
  t.equal(stream.acknowledgedSamples!(), 2.5 * RATE, 'all audio acknowledged');
  t.same(failures, []);
  const logged = lines.join('');
  for (const secret of ['test-key', 'Hello', 'there', 'Bye']) t.notOk(logged.includes(secret), `logs do not contain ${secret}`);
});

t.test('each write is one message; one under 20 ms waits for the next write or for finalize', async (t) => {
  const { fake, engine } = await setup(t);
  const stream = await engine.open(opts);
  for (const f of frames(ramp(0.5), 10)) stream.write(f);
  stream.write(ramp(0.25));
  stream.write(ramp(0.005));
  await until(() => fake.streams[0]?.chunks === 25 + 1, { what: 'audio' });
  const s = fake.streams[0]!;
  t.same([s.minChunkBytes, s.maxChunkBytes, s.oddChunks], [640, 8000, 0], '10 ms writes pair up into 20 ms messages; the 250 ms write is one');
  t.equal(s.bytes, 0.75 * RATE * 2, 'the 5 ms rest waits');
  await stream.finalize();
  t.same([s.chunks, s.bytes], [25 + 1 + 1, 0.755 * RATE * 2], 'finalize sends the rest first');
});

t.test('the send plan handed with the socket: messages of sendMs, the first of its own length with staggerFirst', async (t) => {
  // 0.5 draws 320 + floor(0.5 * 1281) = 960 samples: 60 ms.
  const { engine } = await setup(t, { staggerFirst: () => 0.5 });
  const plans: SendPlan[] = [];
  const shard: SocketHost = {
    socket: () => {
      const socket = socketHere();
      const open = socket.open.bind(socket);
      socket.open = (spec, plan) => (plans.push(plan), open(spec, plan));
      return socket;
    },
  };
  const stream = await engine.open({ ...opts, shard });
  t.same(plans, [{ messageSamples: 1600, firstSamples: 960, minSamples: 320 }], '100 ms messages, the first 60 ms');
  await stream.close();
  const { engine: steady } = await setup(t, { sendMs: 20 });
  await (await steady.open({ ...opts, shard })).close();
  t.same(plans[1], { messageSamples: 320, firstSamples: 320, minSamples: 320 }, 'without staggerFirst every message is sendMs long');
});

t.test('the provider hears every sample as written, and acknowledgedSamples() follows the results', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  const fake = await startFakeDeepgram({ clock, sweepEveryMs: 0, recordAudio: true });
  const engine = new ProviderAEngine({ url: fake.url, apiKey: 'test-key', clock, scheduler, logger: createLogger('silent') });
  t.teardown(async () => {
    await fake.close();
    await engine.close();
    scheduler.close();
  });
  fake.script({ kind: 'accept', results: [{ afterS: 1, words: [word('one', 0, 0.2, 0.5)] }, { afterS: 2, words: [word('two', 0, 1.2, 1.5)] }] });
  const stream = await engine.open(opts);
  const { segments } = collect(stream);
  const audio = ramp(3);
  for (const f of frames(audio.subarray(0, 1.5 * RATE))) stream.write(f);
  await until(() => segments.length === 1, { what: 'the first result' });
  t.equal(stream.acknowledgedSamples!(), RATE, 'the first result covers the first second');
  for (const f of frames(audio.subarray(1.5 * RATE))) stream.write(f);
  await until(() => segments.length === 2 && fake.streams[0]!.bytes === 3 * RATE * 2, { what: 'all audio and the second result' });
  const received = Buffer.concat(fake.streams[0]!.audio);
  t.ok(received.equals(Buffer.from(audio.buffer)), 'the provider heard every sample as written');
  t.equal(stream.acknowledgedSamples!(), 2 * RATE, 'the second result covers two seconds');
  await stream.close();
});

t.test('a 12 s pause survives: KeepAlive goes out while no audio does', async (t) => {
  const { clock, scheduler, fake, engine } = await setup(t);
  fake.script({ kind: 'accept', results: [{ afterS: 1.5, words: [word('again', 0, 1.1, 1.4)] }] });
  const stream = await engine.open(opts);
  const { segments, failures } = collect(stream);
  for (const f of frames(ramp(1), 100)) stream.write(f);
  await until(() => fake.streams[0]?.chunks === 10, { what: 'audio' });
  for (let s = 1; s <= 12; s++) {
    clock.advance(1000);
    await scheduler.tick();
    const expected = s >= 12 ? 2 : s >= 8 ? 1 : 0; // the first period had audio; then one KeepAlive every 4 s
    await until(() => fake.streams[0]!.keepAlives === expected, { what: `${expected} keepalives at ${s} s` });
    fake.sweep();
  }
  t.equal(fake.streams[0]!.open, true, 'the provider kept the stream');
  for (const f of frames(ramp(0.5, RATE))) stream.write(f);
  await until(() => segments.length === 1, { what: 'words after the pause' });
  t.equal(segments[0]!.text, 'again');
  t.same(failures, []);
  t.same(fake.streams[0]!.controls, ['KeepAlive', 'KeepAlive']);

  clock.advance(10_001);
  fake.sweep(); // the scheduler did not run: no KeepAlive, so the provider applies its idle rule
  await until(() => failures.length === 1, { what: 'idle close' });
  t.same(failures, [{ outcome: 'upstream_error', retryable: true, reason: 'provider_idle_timeout' }]);
});

t.test('connect errors map to reasons; 429 and 503 carry Retry-After', async (t) => {
  const { clock, scheduler, fake, engine } = await setup(t);
  const cases: [number, string | undefined, object, number | undefined][] = [
    [401, undefined, { outcome: 'config_error', retryable: false, reason: 'provider_auth' }, undefined],
    [403, undefined, { outcome: 'config_error', retryable: false, reason: 'provider_auth' }, undefined],
    [402, undefined, { outcome: 'config_error', retryable: false, reason: 'provider_budget' }, undefined],
    [429, '7', { outcome: 'upstream_error', retryable: true, reason: 'provider_rate_limited' }, 7000],
    [429, new Date(clock.now() + 30_000).toUTCString(), { outcome: 'upstream_error', retryable: true, reason: 'provider_rate_limited' }, 30_000],
    [500, undefined, { outcome: 'upstream_error', retryable: true, reason: 'provider_5xx' }, undefined],
    [503, '2', { outcome: 'upstream_error', retryable: true, reason: 'provider_5xx' }, 2000],
    [400, undefined, { outcome: 'config_error', retryable: false, reason: 'provider_rejected_request' }, undefined],
  ];
  for (const [status, retryAfter, failure, retryAfterMs] of cases) {
    fake.script({ kind: 'reject', status, ...(retryAfter ? { retryAfter } : {}) });
    const err = await engine.open(opts).then(
      () => t.fail('opened'),
      (e: unknown) => e,
    );
    t.ok(err instanceof SttOpenError, `${status} rejects with SttOpenError`);
    t.same((err as SttOpenError).failure, failure, `${status} → ${(failure as SttFailure).reason}`);
    t.equal((err as SttOpenError).retryAfterMs, retryAfterMs);
  }

  const wrongKey = new ProviderAEngine({ url: fake.url, apiKey: 'not-the-key', clock, scheduler, logger: createLogger('silent') });
  t.match(await failureOf(wrongKey.open(opts)), { reason: 'provider_auth', retryable: false }, 'the fake checks the key itself');

  fake.script({ kind: 'hold' });
  const held = engine.open(opts);
  await until(() => fake.attempts.length === cases.length + 2, { what: 'the held attempt' });
  clock.advance(4999);
  await scheduler.tick();
  clock.advance(1);
  await scheduler.tick();
  t.same(await failureOf(held), { outcome: 'upstream_error', retryable: true, reason: 'initialization_failed' }, 'connect timeout via the scheduler');

  const closedPort = await freePort();
  const refused = new ProviderAEngine({ url: `ws://127.0.0.1:${closedPort}/v1/listen`, apiKey: 'k', clock, scheduler, logger: createLogger('silent') });
  t.match(await failureOf(refused.open(opts)), { reason: 'initialization_failed', retryable: true }, 'connection refused');

  t.equal(engine.supports('multi'), true);
  t.equal(engine.supports('de'), true);
  t.equal(engine.supports('xx'), false);
  t.match(await failureOf(engine.open({ ...opts, language: 'xx' })), { reason: 'language_unsupported', retryable: false });
  t.equal(fake.streams.length, 0, 'no stream was ever opened');
});

t.test('a mid-stream drop fails once and tells how much audio the results covered', async (t) => {
  const { fake, engine } = await setup(t);
  fake.script({ kind: 'accept', results: [{ afterS: 1, words: [word('kept', 0, 0.2, 0.5)] }], dropAfterBytes: 2 * RATE * 2 });
  const stream = await engine.open(opts);
  const { segments, failures } = collect(stream);
  const audio = ramp(2);
  // The words arrive before the second second is sent: a drop may lose answers still in flight, as a real one can.
  for (const f of frames(audio.subarray(0, RATE))) stream.write(f);
  await until(() => segments.length === 1, { what: 'the first result' });
  for (const f of frames(audio.subarray(RATE))) stream.write(f);
  await until(() => failures.length === 1, { what: 'the failure' });
  t.same(failures, [{ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' }]);
  t.equal(segments.length, 1, 'words before the drop were delivered');
  t.equal(stream.acknowledgedSamples!(), RATE, 'the result covered the first second: the session keeps the rest');
  stream.write(ramp(0.5));
  t.equal(stream.acknowledgedSamples!(), RATE, 'writes after the failure are ignored');
  await stream.close();
  await stream.close();
  t.equal(failures.length, 1, 'one failure event');
  t.equal(engine.load, 0);

  fake.script({ kind: 'accept', dropAfterBytes: 3200, dropCode: 1011, dropReason: 'NET-0000' });
  const second = await engine.open(opts);
  const c2 = collect(second);
  second.write(ramp(0.1));
  await until(() => c2.failures.length === 1, { what: 'error close' });
  t.same(c2.failures, [{ outcome: 'upstream_error', retryable: true, reason: 'provider_5xx' }], 'an error close frame maps too');
});

t.test('finalize flushes the last words and resolves on from_finalize; a silent provider is waited for, bounded', async (t) => {
  const { clock, scheduler, fake, engine } = await setup(t);
  fake.script(
    { kind: 'accept', results: [{ afterS: 30, words: [word('last', 1, 0.6, 0.9, 'Last.')] }] },
    { kind: 'accept', answerDelayMs: 60_000 },
  );
  const stream = await engine.open(opts);
  const { segments } = collect(stream);
  for (const f of frames(ramp(1))) stream.write(f);
  stream.write(ramp(0.01));
  await stream.finalize();
  t.same(segments.map((s) => [s.speaker, s.text]), [['SPEAKER_01', 'Last.']], 'words resolved before finalize() returns');
  t.equal(stream.acknowledgedSamples!(), 1.01 * RATE, 'everything written is answered for');
  await stream.finalize();
  t.same(fake.streams[0]!.controls, ['Finalize'], 'nothing unanswered: no second Finalize');

  const slow = await engine.open(opts);
  for (const f of frames(ramp(0.4))) slow.write(f);
  let done = false;
  const p = slow.finalize().then(() => (done = true));
  await until(() => fake.streams[1]!.controls.length === 1, { what: 'Finalize sent' });
  clock.advance(4999);
  await scheduler.tick();
  t.equal(done, false, 'still waiting for the answer');
  clock.advance(1);
  await scheduler.tick();
  await p;
  t.equal(slow.acknowledgedSamples!(), 0, 'unanswered audio stays unacknowledged');
});

t.test('close sends CloseStream, waits for Metadata and the close, and is idempotent', async (t) => {
  const { fake, engine } = await setup(t);
  fake.script({ kind: 'accept', results: [{ afterS: 9, words: [word('tail', 0, 0.1, 0.3)] }] });
  const stream = await engine.open(opts);
  const { segments, failures } = collect(stream);
  for (const f of frames(ramp(0.5))) stream.write(f);
  const a = stream.close();
  const b = stream.close();
  t.equal(a, b, 'the same promise');
  await a;
  const s = fake.streams[0]!;
  t.same(s.controls, ['CloseStream']);
  t.ok(s.metadataSent, 'Deepgram answered with Metadata');
  t.equal(s.open, false);
  t.same(segments.map((x) => x.text), ['tail'], 'CloseStream flushes final words');
  stream.write(ramp(0.1));
  await stream.finalize();
  t.equal(s.bytes, 0.5 * RATE * 2, 'nothing sent after close');
  t.same(failures, [], 'a requested close is not a failure');
  t.equal(engine.load, 0);
});
