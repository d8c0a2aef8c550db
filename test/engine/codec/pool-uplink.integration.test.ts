// Provider sockets held by the codec shard that decodes the session (CodecStream.socket()), against the Deepgram fake:
// the provider gets the decoded samples in order, text, close and refusals come back, a thread's crash is reported.
import t from 'tap';
import { CodecPool } from '../../../engine/codec/pool.js';
import type { CodecStream } from '../../../engine/codec/stream.js';
import { socketHere, type ProviderSocket, type SendPlan, type SocketHandlers, type SocketSpec } from '../../../engine/codec/uplink.js';
import type { UplinkOpenAnswer } from '../../../workers/messages.js';
import { listenUrl } from '../../../engine/stt/provider-a/protocol.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';
import { drive, frames, speech } from '../../helpers/codec-fixtures.js';
import { CRASH_WORKER, crashShardOf } from '../../helpers/crash-decode-worker.js';
import { until } from '../../helpers/until.js';

const dir = t.testdir();
const fake = await startFakeDeepgram({ recordAudio: true, sweepEveryMs: 0 });
const plain = new CodecPool({ threads: 1 });
const threads = new CodecPool({ threads: 1 });
const inline = new CodecPool({ threads: 1, inline: () => true });
t.teardown(async () => {
  await Promise.all([plain.close(), threads.close(), inline.close()]);
  await fake.close();
});

const spec: SocketSpec = {
  url: listenUrl(fake.url, 'nova-3', 'en', []),
  headers: { Authorization: 'Token test-key' },
  maxPayload: 1 << 20,
  maxBufferedBytes: 1 << 20,
};
/** 100 ms messages: the stream holds five 20 ms frames back for each. */
const plan: SendPlan = { messageSamples: 1600, firstSamples: 1600, minSamples: 320 };

const pcm = speech(dir, 16000);
const enc = new OpusEncoderStream(16000);
const opus = frames(pcm, 320).map((f) => enc.encode(f));
/** What the same frames decode to on a pool without sockets in its shards. */
const expected = await drive(plain.open({ sessionId: 'plain', codec: 'opus_fs320', sampleRate: 16000, channels: 1 }), opus, 5);

interface Seen {
  texts: string[];
  closes: [number, string][];
  stuck: number;
}

/** Listens, then opens: what a provider stream does. */
function open(u: ProviderSocket, h: SocketHandlers, o: SocketSpec = spec): Promise<UplinkOpenAnswer> {
  u.listen(h);
  return u.open(o, plan);
}

function handlers(): SocketHandlers & Seen {
  const seen: Seen = { texts: [], closes: [], stuck: 0 };
  return Object.assign(seen, {
    text: (x: string) => void seen.texts.push(x),
    close: (code: number, reason: string) => void seen.closes.push([code, reason]),
    stuck: () => void seen.stuck++,
  });
}

/** Pushes the frames five at a time (a 100 ms message each) and counts what the shard sent and what came back. */
async function stream(s: CodecStream, messages: readonly Uint8Array[]): Promise<{ uplinked: number; answered: number }> {
  let uplinked = 0;
  let answered = 0;
  s.on('uplinked', (ch, n) => {
    if (ch === 0) uplinked += n;
  });
  s.on('pcm', (p) => (answered += p[0]?.length ?? 0));
  for (let i = 0; i < messages.length; i++) {
    s.push(messages[i]!.slice());
    if (i % 5 === 4) await new Promise((r) => setTimeout(r, 2));
  }
  await s.close();
  return { uplinked, answered };
}

for (const [name, pool] of [
  ['a codec thread', threads],
  ['the main thread (inline shard)', inline],
] as const) {
  t.test(`a socket held by ${name}: the provider gets the samples, its text and close come back`, async (t) => {
    const s = pool.open({ sessionId: `up-${name}`, codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
    const uplink = s.socket(0);
    const h = handlers();
    const before = fake.streams.length;
    t.same(await open(uplink, h), { ok: true });
    const provider = fake.streams[before]!;
    t.equal(provider.headers.authorization, 'Token test-key');
    const { uplinked, answered } = await stream(s, opus);
    t.equal(uplinked, expected[0]!.length, 'every decoded sample went out from the shard');
    t.equal(answered, 0, 'none came back to the main thread');
    t.equal(s.stats.samples[0], expected[0]!.length);
    uplink.sendText('{"type":"Finalize"}', true);
    await until(() => provider.controls.includes('Finalize'), { what: 'Finalize' });
    const got = new Int16Array(new Uint8Array(Buffer.concat(provider.audio)).buffer);
    t.same(got, expected[0], 'the provider has the same samples, in order');
    // One message per decoded batch (here faster than real time, so some batches hold more than five frames).
    t.equal(provider.oddChunks, 0, 'whole samples in every message');
    t.ok(provider.chunks <= Math.ceil(opus.length / 5), `${provider.chunks} messages for ${opus.length} frames`);
    // Its text comes back: the fake answers Finalize with a final Results.
    await until(() => h.texts.some((x) => x.includes('"from_finalize":true')), { what: 'the answer to Finalize' });
    t.ok(JSON.parse(h.texts.find((x) => x.includes('Results'))!).type === 'Results');
    // The provider drops the connection: one close, then the channel's PCM would come back to the main thread.
    provider.drop();
    await until(() => h.closes.length > 0, { what: 'the close' });
    t.equal(h.closes.length, 1);
    t.equal(h.closes[0]![0], 1006, 'closed without a close frame');
  });
}

t.test('once the socket is gone the shard answers with the PCM again', async (t) => {
  const s = threads.open({ sessionId: 'gone', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  const uplink = s.socket(0);
  const before = fake.streams.length;
  t.same(await open(uplink, handlers()), { ok: true });
  const half = opus.length >> 1;
  let answered = 0;
  let uplinked = 0;
  s.on('pcm', (p) => (answered += p[0]!.length));
  s.on('uplinked', (_ch, n) => (uplinked += n));
  for (let i = 0; i < opus.length; i++) {
    if (i === half) {
      // Everything pushed so far has come back (as counts) before the socket goes.
      await until(() => uplinked + answered >= half * 320, { what: 'the first half back' });
      uplink.terminate();
      await until(() => !fake.streams[before]!.open, { what: 'the provider sees the socket close' });
    }
    s.push(opus[i]!.slice());
    if (i % 5 === 4) await new Promise((r) => setTimeout(r, 2));
  }
  await s.close();
  t.equal(uplinked + answered, expected[0]!.length, 'no sample lost between the two');
  t.equal(uplinked, fake.streams[before]!.bytes / 2, 'what the provider got is what was counted as sent');
  t.ok(answered > 0 && uplinked > 0);
});

t.test('a refused handshake answers with its status and Retry-After; a bad key with 401', async (t) => {
  const s = threads.open({ sessionId: 'refused', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  t.teardown(() => s.close());
  fake.script({ kind: 'reject', status: 429, retryAfter: '7' });
  const a = await open(s.socket(0), handlers());
  t.match(a, { ok: false, status: 429, retryAfter: '7' });
  const b = await open(s.socket(0), handlers(), { ...spec, headers: { Authorization: 'Token wrong' } });
  t.match(b, { ok: false, status: 401 });
  const c = await open(s.socket(0), handlers(), { ...spec, url: 'ws://127.0.0.1:1/v1/listen' });
  t.match(c, { ok: false, why: /socket error/ });
});

t.test('a socket lost with its codec thread is reported as a dropped connection', async (t) => {
  const pool = new CodecPool({ threads: 1, filename: CRASH_WORKER });
  t.teardown(() => pool.close());
  const s = pool.open({ sessionId: 'crash', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  const h = handlers();
  t.same(await open(s.socket(0), h), { ok: true });
  await crashShardOf(pool.open({ sessionId: 'crasher', codec: 'pcm16', sampleRate: 16000, channels: 1 }));
  t.same(h.closes, [[1006, 'codec thread exited']]);
  // The new thread re-creates the decoders and, with no socket there, answers with the PCM.
  const { uplinked, answered } = await stream(s, opus.slice(0, 50));
  t.equal(uplinked, 0);
  t.equal(answered, 50 * 320);
});

t.test('a socket for audio no shard decodes lives on this thread: each write is one message, text and close come back', async (t) => {
  const u = socketHere();
  const h = handlers();
  const before = fake.streams.length;
  t.same(await open(u, h), { ok: true });
  const provider = fake.streams[before]!;
  const pcm = expected[0]!.subarray(0, 4000);
  u.sendAudio(pcm);
  u.sendAudio(pcm.subarray(0, 100)); // under minSamples: it waits for the flush
  await until(() => provider.chunks === 1, { what: 'the first message' });
  u.sendText('{"type":"Finalize"}', true);
  await until(() => provider.controls.includes('Finalize'), { what: 'Finalize' });
  t.same([provider.chunks, provider.bytes], [2, 4100 * 2], 'one message per write, the short one flushed before Finalize');
  provider.drop();
  await until(() => h.closes.length > 0, { what: 'the close' });
  t.same(h.closes.map((c) => c[0]), [1006]);
});

t.test('two channels: each channel’s socket gets that channel’s samples', async (t) => {
  // Channel 0x01 the speech, 0x02 the same speech a second later: each message is the channel id, then one packet.
  const second = opus.slice(50);
  const messages: Uint8Array[] = [];
  for (let i = 0; i < second.length; i++) {
    messages.push(Uint8Array.of(0x01, ...opus[i]!), Uint8Array.of(0x02, ...second[i]!));
  }
  const want = await drive(plain.open({ sessionId: 'plain-2ch', codec: 'opus_fs320', sampleRate: 16000, channels: 2 }), messages, 10);
  const s = threads.open({ sessionId: 'up-2ch', codec: 'opus_fs320', sampleRate: 16000, channels: 2 });
  const before = fake.streams.length;
  t.same(await open(s.socket(0), handlers()), { ok: true });
  t.same(await open(s.socket(1), handlers()), { ok: true });
  const { uplinked, answered } = await stream(s, messages);
  t.equal(answered, 0);
  t.equal(uplinked, want[0]!.length, 'channel 0 counted');
  t.same(s.stats.samples, [want[0]!.length, want[1]!.length]);
  await until(() => fake.streams[before]!.bytes === want[0]!.length * 2 && fake.streams[before + 1]!.bytes === want[1]!.length * 2, { what: 'both channels' });
  const got = [0, 1].map((i) => new Int16Array(new Uint8Array(Buffer.concat(fake.streams[before + i]!.audio)).buffer));
  t.same(got, want, 'each socket has its channel, in order');
});
