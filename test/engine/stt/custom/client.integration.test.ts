// The custom transcription client against a real WebSocket server: bytes out unchanged, CloseStream last, object answers
// in, raw arrays and foreign types refused, the 90 s inactivity close on a ManualClock, failures mid-session and at open.
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { ManualClock } from '../../../../engine/clock.js';
import { Scheduler } from '../../../../engine/scheduler.js';
import { createLogger } from '../../../../engine/logger.js';
import { CustomSttClient, type CustomSttOptions } from '../../../../engine/stt/custom/client.js';
import { SttOpenError, type SttFailure } from '../../../../engine/stt/types.js';
import type { RawSegment } from '../../../../engine/audio/buffer-loop.js';
import { startFakeCustomStt, type FakeCustomStt } from '../../../fakes/custom-stt-server.js';

/** 0.5 s of 16 kHz s16le audio, random bytes so any change on the way would show. */
const HALF_SECOND = 16_000;

async function setup(t: Test): Promise<{ fake: FakeCustomStt; clock: ManualClock; scheduler: Scheduler; opts: CustomSttOptions }> {
  const fake = await startFakeCustomStt();
  t.teardown(() => fake.close());
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const opts: CustomSttOptions = { url: fake.url, codec: 'pcm16', sampleRate: 16000, channels: 1, language: 'en', sessionId: 's1', clock, scheduler, logger: createLogger('silent') };
  return { fake, clock, scheduler, opts };
}

async function open(t: Test, opts: CustomSttOptions): Promise<{ client: CustomSttClient; segments: RawSegment[][]; failures: SttFailure[]; next: () => Promise<RawSegment[]> }> {
  const client = await CustomSttClient.open(opts);
  t.teardown(() => client.close());
  const segments: RawSegment[][] = [];
  const failures: SttFailure[] = [];
  const waiters: ((s: RawSegment[]) => void)[] = [];
  client.on('segments', (s) => {
    segments.push(s);
    waiters.shift()?.(s);
  });
  client.on('failure', (f) => failures.push(f));
  return { client, segments, failures, next: () => new Promise((resolve) => waiters.push(resolve)) };
}

const failed = (client: CustomSttClient): Promise<SttFailure> => new Promise((resolve) => client.on('failure', resolve));

t.test('audio goes out byte for byte, answers come back as segments, CloseStream ends the stream', async (t) => {
  const { fake, opts } = await setup(t);
  fake.script = {
    afterFrame: { 2: [{ json: { segments: [{ text: 'hello there', speaker: 'SPEAKER_01', start: 0.1, end: 0.4 }, { text: 'no times given' }] } }] },
    onCloseStream: { answers: [{ json: { type: 'Results', segments: [{ text: 'last words', start: 1.6, end: 1.9 }] } }] },
  };
  const { client, segments, next } = await open(t, opts);
  const conn = await fake.nextConnection();
  t.equal(conn.query.get('tenant'), 't1', 'the configured query survives');
  t.same(Object.fromEntries([...conn.query].filter(([k]) => k !== 'tenant')), { codec: 'pcm16', sample_rate: '16000', channels: '1', language: 'en' });

  const sent = [randomBytes(HALF_SECOND), randomBytes(HALF_SECOND), randomBytes(HALF_SECOND), randomBytes(HALF_SECOND)];
  const firstAnswer = next();
  for (const b of sent.slice(0, 3)) client.writeEncoded(new Uint8Array(b));
  t.same(await firstAnswer, [
    { text: 'hello there', speaker: 'SPEAKER_01', start: 0.1, end: 0.4, sttProvider: 'custom' },
    { text: 'no times given', speaker: 'SPEAKER_00', start: 0.4, end: 1.5, sttProvider: 'custom' },
  ], 'server times kept; a missing speaker is SPEAKER_00, missing times run from the last segment to the audio received');
  t.equal(client.audioSeconds, 1.5);
  // A view into a larger buffer: only the viewed bytes go out.
  const big = Buffer.concat([Buffer.from('xx'), sent[3]!, Buffer.from('yy')]);
  client.writeEncoded(new Uint8Array(big.buffer, big.byteOffset + 2, HALF_SECOND));

  await client.finish();
  t.equal(await conn.closeStream, 4, 'CloseStream came after every audio frame');
  t.equal(conn.frames.length, 4);
  conn.frames.forEach((f, i) => t.ok(f.equals(sent[i]!), `frame ${i} arrived unchanged`));
  t.same(conn.texts, ['{"type":"CloseStream"}'], 'CloseStream is the only text frame, after the audio');
  t.same(segments.at(-1), [{ text: 'last words', speaker: 'SPEAKER_00', start: 1.6, end: 1.9, sttProvider: 'custom' }], 'answers sent before the close are emitted before finish() resolves');
  t.equal(await conn.closed, 1000);
  client.writeEncoded(new Uint8Array(4));
  t.equal(client.stats.framesSent, 4, 'writes after finish() go nowhere');
});

t.test('raw arrays, foreign types, broken JSON and bad segments are refused, ignored or dropped', async (t) => {
  const { fake, opts } = await setup(t);
  const { client, segments, next } = await open(t, opts);
  const conn = await fake.nextConnection();
  client.writeEncoded(new Uint8Array(HALF_SECOND));
  await conn.waitForFrames(1);
  const answered = next();
  conn.send({ json: [{ text: 'raw array of segments' }] });
  conn.send({ json: { type: 'Metadata', segments: [{ text: 'not results' }] } });
  conn.send({ json: { type: null, segments: [{ text: 'type present but null' }] } });
  conn.send({ raw: '{"segments": [{"text": "cut off' });
  conn.send({ json: 'just a string' });
  conn.send({ json: { results: [{ text: 'wrong key' }] } });
  conn.send({ binary: new Uint8Array([1, 2, 3]) });
  conn.send({ json: { segments: [{ text: 5 }, { text: 'string start', start: '1' }, { text: 'numeric speaker', speaker: 3 }, { text: 'negative', start: -1 }, 'a string', null, { text: '  ' }, { text: 'kept', speaker: 'SPEAKER_02', start: 0.2, end: 0.1 }] } });
  t.same(await answered, [{ text: 'kept', speaker: 'SPEAKER_02', start: 0.2, end: 0.2, sttProvider: 'custom' }], 'only the valid segment; an end before its start is clamped');
  t.equal(segments.length, 1, 'nothing came from the refused answers');
  t.match(client.stats, { rejectedAnswers: 5, ignoredAnswers: 2, answers: 1, invalidSegments: 6, segments: 1 });
});

t.test('90 s without a frame either way closes the connection; the next audio reconnects', async (t) => {
  const { fake, clock, scheduler, opts } = await setup(t);
  const { client, failures, next } = await open(t, opts);
  const first = await fake.nextConnection();
  client.writeEncoded(new Uint8Array(HALF_SECOND));
  await first.waitForFrames(1);

  clock.advance(60_000);
  await scheduler.tick();
  const answered = next();
  first.send({ json: { segments: [{ text: 'an answer is activity too' }] } });
  await answered;
  clock.advance(60_000);
  await scheduler.tick();
  t.equal(client.stats.idleCloses, 0, '120 s after the last audio but 60 s after the last answer: still open');
  clock.advance(29_999);
  await scheduler.tick();
  t.equal(client.stats.idleCloses, 0, 'one millisecond short of 90 s');
  clock.advance(1);
  await scheduler.tick();
  t.equal(client.stats.idleCloses, 1, 'closed at 90 s');
  t.equal(await first.closed, 1000, 'a normal close');
  t.same(failures, [], 'inactivity is not a failure');

  const again = next();
  const resumed = new Uint8Array(randomBytes(HALF_SECOND));
  const expected = Buffer.from(resumed);
  client.writeEncoded(resumed);
  structuredClone(resumed.buffer, { transfer: [resumed.buffer] });
  t.equal(resumed.byteLength, 0, 'the caller handed its buffer on (as to the codec thread) while the client reconnects');
  const second = await fake.nextConnection();
  await second.waitForFrames(1);
  t.ok(second.frames[0]!.equals(expected), 'the frame still arrives whole');
  second.send({ json: { segments: [{ text: 'after the pause', start: 0.1, end: 0.3 }] } });
  t.match(await again, [{ start: 0.6, end: 0.8 }], "the new connection's times count from its first byte (0.5 s in)");
  t.equal(client.stats.connections, 2);
});

t.test('the server going away mid-session is a failure; later audio is dropped', async (t) => {
  const { fake, opts } = await setup(t);
  for (const end of ['terminate', 'close 1011'] as const) {
    const { client } = await open(t, opts);
    const conn = await fake.nextConnection();
    client.writeEncoded(new Uint8Array(HALF_SECOND));
    await conn.waitForFrames(1);
    const failure = failed(client);
    if (end === 'terminate') conn.terminate();
    else conn.close(1011, 'internal error');
    t.same(await failure, { outcome: 'upstream_error', retryable: true, reason: 'connection_lost' }, end);
    client.writeEncoded(new Uint8Array(HALF_SECOND));
    t.equal(client.stats.framesSent, 1, `${end}: nothing is sent after the failure`);
    await client.finish();
  }
});

t.test('finish() is bounded when the server never closes', async (t) => {
  const { fake, clock, scheduler, opts } = await setup(t);
  fake.script = { onCloseStream: { then: 'hold' } };
  const { client, failures } = await open(t, opts);
  const conn = await fake.nextConnection();
  let done = false;
  const finishing = client.finish().then(() => (done = true));
  await conn.closeStream;
  clock.advance(9_999);
  await scheduler.tick();
  t.notOk(done, 'still waiting for the slow server');
  clock.advance(1);
  await scheduler.tick();
  await finishing;
  t.equal(await conn.closed, 1000, 'the client closed it after 10 s');
  t.same(failures, []);
});

t.test('open() fails with initialization_failed when the server refuses, is absent or never answers', async (t) => {
  const { fake, clock, scheduler, opts } = await setup(t);
  const initFailure = async (p: Promise<unknown>, what: string): Promise<void> => {
    const err = await p.then(() => undefined, (e: unknown) => e);
    t.ok(err instanceof SttOpenError, `${what}: an SttOpenError`);
    t.same((err as SttOpenError).failure, { outcome: 'upstream_error', retryable: true, reason: 'initialization_failed' }, what);
  };

  fake.refuse = true;
  await initFailure(CustomSttClient.open(opts), 'HTTP 503 instead of an upgrade');

  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  await initFailure(CustomSttClient.open({ ...opts, url: `ws://127.0.0.1:${port}/` }), 'nothing listening');

  const sockets: net.Socket[] = [];
  const silent = net.createServer((s) => sockets.push(s));
  const accepted = new Promise((resolve) => silent.once('connection', resolve));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });
  const opening = CustomSttClient.open({ ...opts, url: `ws://127.0.0.1:${(silent.address() as net.AddressInfo).port}/` });
  await accepted;
  clock.advance(10_000);
  await scheduler.tick();
  await initFailure(opening, 'no handshake answer within 10 s');
});
