// Conformance of the fake Deepgram: Deepgram's own SDK (@deepgram/sdk v5) drives it, so the fake cannot drift from the protocol.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import WebSocket from 'ws';
import { DeepgramClient, DeepgramEnvironment } from '@deepgram/sdk';
import { ManualClock } from '../../engine/clock.js';
import { chunks, silence } from '../helpers/speech.js';
import { until } from '../helpers/until.js';
import { startFakeDeepgram, type FakeDeepgram } from './deepgram-server.js';

const OPTIONS = {
  model: 'nova-3',
  language: 'en',
  encoding: 'linear16',
  sample_rate: 16000,
  channels: 1,
  diarize: 'true',
  punctuate: 'true',
  smart_format: 'true',
  interim_results: 'false',
  endpointing: 300,
  keyterm: ['Omi', 'wearable'],
} as const;

/** Opens a socket the way an SDK user does, pointed at the fake through a custom environment. */
async function sdkSocket(fake: FakeDeepgram, apiKey = 'test-key', extra: Record<string, unknown> = {}) {
  const client = new DeepgramClient({ apiKey, environment: { ...DeepgramEnvironment.Production, production: fake.url.replace('/v1/listen', '') } });
  const socket = await client.listen.v1.connect({ ...OPTIONS, reconnectAttempts: 0, ...extra } as Parameters<typeof client.listen.v1.connect>[0]);
  const messages: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.on('close', (e: any) => resolve({ code: e.code, reason: e.reason })));
  socket.on('message', (m: unknown) => messages.push(m));
  socket.on('error', () => undefined);
  socket.connect();
  return { socket, messages, closed };
}

t.test('the SDK streams audio and gets scripted Results, Finalize and CloseStream answers', async (t) => {
  const fake = await startFakeDeepgram();
  t.teardown(() => fake.close());
  fake.script({
    kind: 'accept',
    results: [
      { afterS: 1, words: [{ word: 'hello', punctuated_word: 'Hello,', speaker: 0, start: 0.2, end: 0.5 }, { word: 'there', punctuated_word: 'there.', speaker: 1, start: 0.6, end: 0.9 }] },
      { afterS: 5, words: [{ word: 'later', punctuated_word: 'Later.', speaker: 1, start: 2.1, end: 2.4 }] },
    ],
  });
  const { socket, messages, closed } = await sdkSocket(fake);
  await socket.waitForOpen();
  for (const c of chunks(silence(2.5), 100)) socket.sendMedia(c);
  socket.sendKeepAlive({ type: 'KeepAlive' });
  await until(() => messages.length >= 1 && fake.streams[0]?.keepAlives === 1, { what: 'first Results' });
  const first = messages[0];
  t.equal(first.type, 'Results');
  t.same([first.start, first.duration, first.is_final, first.from_finalize], [0, 1, true, false], 'covers the first second');
  t.same(first.channel.alternatives[0].words.map((w: any) => [w.punctuated_word, w.speaker]), [['Hello,', 0], ['there.', 1]]);
  t.equal(first.channel.alternatives[0].transcript, 'Hello, there.');

  socket.sendFinalize({ type: 'Finalize' });
  await until(() => messages.length >= 2, { what: 'the Finalize answer' });
  t.same([messages[1].from_finalize, messages[1].start, messages[1].duration], [true, 1, 1.5], 'Finalize answers the rest of the audio');
  t.equal(messages[1].channel.alternatives[0].words[0].punctuated_word, 'Later.', 'words spoken in the received audio are flushed');

  socket.sendCloseStream({ type: 'CloseStream' });
  const c = await closed;
  t.equal(c.code, 1000);
  t.equal(messages.at(-1).type, 'Metadata');
  t.equal(messages.at(-1).duration, 2.5);
  const s = fake.streams[0]!;
  t.equal(s.headers.authorization, 'Token test-key');
  t.same(s.query.getAll('keyterm'), ['Omi', 'wearable']);
  t.equal(s.query.get('sample_rate'), '16000');
  t.equal(s.bytes, 2.5 * 32000);
  t.same(s.controls, ['KeepAlive', 'Finalize', 'CloseStream']);
  t.equal(s.closedBy, 'server');
  t.equal(fake.stats().chunks, 25);
});

t.test('the handshake is refused for a wrong key (401) and for options Deepgram refuses (400)', async (t) => {
  const fake = await startFakeDeepgram();
  t.teardown(() => fake.close());
  const wrong = await sdkSocket(fake, 'wrong-key');
  await t.rejects(wrong.socket.waitForOpen());
  t.equal(fake.attempts[0]?.status, 401);

  for (const bad of [{ encoding: 'pcm16' }, { sample_rate: 'abc' }, { encoding: 'linear16', sample_rate: undefined }, { model: 'nova-9' }, { language: 'xx' }, { model: 'nova-2', keyterm: ['Omi'] }]) {
    const s = await sdkSocket(fake, 'test-key', bad);
    await t.rejects(s.socket.waitForOpen(), `refused: ${JSON.stringify(bad)}`);
  }
  t.same(fake.attempts.map((a) => a.status), [401, 400, 400, 400, 400, 400, 400]);
  t.equal(fake.streams.length, 0, 'no stream opened');

  // Browsers cannot set headers: Deepgram also takes the key as the subprotocols `token, <key>`.
  const browser = new WebSocket(`${fake.url}?model=nova-3&encoding=linear16&sample_rate=16000`, ['token', 'test-key']);
  await new Promise((resolve, reject) => (browser.once('open', resolve), browser.once('error', reject)));
  t.equal(browser.protocol, 'token');
  browser.close();
});

t.test('scripted connect errors carry status and Retry-After; held upgrades never open', async (t) => {
  const fake = await startFakeDeepgram();
  t.teardown(() => fake.close());
  fake.script({ kind: 'reject', status: 429, retryAfter: '7' }, { kind: 'reject', status: 402 }, { kind: 'hold' });
  // The SDK hides handshake answers (it reports "Unexpected server response"), so read them with plain ws.
  for (const expected of [429, 402]) {
    const res = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve) => {
      const ws = new WebSocket(`${fake.url}?model=nova-3&encoding=linear16&sample_rate=16000`, { headers: { authorization: 'Token test-key' } });
      ws.on('error', () => undefined);
      ws.on('unexpected-response', (_req, r) => {
        let body = '';
        const socket = r.socket; // kept alive by the server after a 4xx unless destroyed
        r.on('data', (d: Buffer) => (body += d.toString()));
        r.on('end', () => {
          socket.destroy();
          resolve({ status: r.statusCode ?? 0, retryAfter: r.headers['retry-after'] as string | undefined, body });
        });
      });
    });
    t.equal(res.status, expected);
    if (expected === 429) t.equal(res.retryAfter, '7');
    t.match(JSON.parse(res.body), { err_code: String, err_msg: String, request_id: String });
  }
  const held = await sdkSocket(fake);
  await until(() => fake.attempts.length === 3, { what: 'the held attempt' });
  t.equal(held.socket.readyState, 0, 'still connecting');
  held.socket.close();
  await fake.close();
});

t.test('a stream idle for 10 s (by the injected clock) closes 1011 NET-0001; KeepAlive and audio keep it open', async (t) => {
  const clock = new ManualClock();
  const fake = await startFakeDeepgram({ clock, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const { socket, closed } = await sdkSocket(fake);
  await socket.waitForOpen();
  await until(() => fake.streams.length === 1, { what: 'open' });
  clock.advance(6000);
  socket.sendKeepAlive({ type: 'KeepAlive' });
  await until(() => fake.streams[0]!.keepAlives === 1, { what: 'keepalive' });
  clock.advance(6000);
  socket.sendMedia(new Int16Array(320));
  await until(() => fake.streams[0]!.chunks === 1, { what: 'audio' });
  clock.advance(9000);
  fake.sweep();
  t.equal(fake.streams[0]!.open, true, '21 s after open but never 10 s idle');
  clock.advance(1001);
  fake.sweep();
  const c = await closed;
  t.same([c.code, c.reason], [1011, 'NET-0001']);
  t.equal(fake.streams[0]!.closedBy, 'server');
});

t.test('a scripted mid-stream drop cuts the socket after N bytes', async (t) => {
  const fake = await startFakeDeepgram();
  t.teardown(() => fake.close());
  fake.script({ kind: 'accept', dropAfterBytes: 6400 });
  const { socket, closed } = await sdkSocket(fake);
  await socket.waitForOpen();
  for (const c of chunks(silence(0.5), 100)) socket.sendMedia(c);
  const c = await closed;
  t.equal(c.code, 1006, 'abnormal closure, no close frame');
  t.equal(fake.streams[0]!.bytes, 6400);
});

t.test('standalone: prints its port, auto-answers and serves /stats', async (t) => {
  const script = fileURLToPath(new URL('./deepgram-server.js', import.meta.url));
  // Started as the bench starts it: without the test runner's loaders.
  const child = spawn(process.execPath, [script, '--port', '0', '--key', 'bench-key'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } });
  t.teardown(() => void child.kill('SIGTERM'));
  const line = await new Promise<string>((resolve) => child.stdout.once('data', (b: Buffer) => resolve(b.toString())));
  const { port } = JSON.parse(line) as { port: number };
  t.ok(port > 0);
  const client = new DeepgramClient({ apiKey: 'bench-key', environment: { ...DeepgramEnvironment.Production, production: `ws://127.0.0.1:${port}` } });
  const socket = await client.listen.v1.connect({ ...OPTIONS, reconnectAttempts: 0 } as Parameters<typeof client.listen.v1.connect>[0]);
  const results: any[] = [];
  socket.on('message', (m: any) => m.type === 'Results' && results.push(m));
  socket.connect();
  await socket.waitForOpen();
  for (const c of chunks(silence(4.1), 20)) socket.sendMedia(c);
  await until(() => results.length >= 2, { what: 'two Results' });
  t.same(results.map((r) => [r.start, r.duration]), [[0, 2], [2, 2]], 'one Results per 2 s of audio');
  t.equal(results[0].channel.alternatives[0].words[0].speaker, 0);
  const stats = (await (await fetch(`http://127.0.0.1:${port}/stats`)).json()) as any;
  t.match(stats, { streamsOpened: 1, streamsOpen: 1, bytes: 205 * 640, chunks: 205, lagMs: { count: 205 } });
  await fetch(`http://127.0.0.1:${port}/stats/reset`, { method: 'POST' });
  t.match(await (await fetch(`http://127.0.0.1:${port}/stats`)).json(), { streamsOpened: 0, bytes: 0, chunks: 0, lagMs: { count: 0 } });
  socket.close();
});
