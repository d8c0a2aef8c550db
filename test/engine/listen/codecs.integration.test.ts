// Every codec over a real /v4/listen socket: real encoded speech in device-sized messages reaches the STT stage as 16 kHz PCM of the same duration.
import { until } from '../../helpers/until.js';
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { open, type ListenClient } from '../../helpers/listen.js';
import { RecordingSttEngine, type RecordingSttStream } from '../../fakes/recording-stt.js';
import { Lc3Encoder } from '../../../native/index.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { aacAdts, concat, elc3, frames, onChannel, pcmMessages, sine, speech, tone } from '../../helpers/codec-fixtures.js';
import type { Codec } from '../../../engine/codec/pool.js';

const PHRASE = 'Wearables stream audio to the server, one frame at a time.'; // about 3.4 s
const dir = t.testdir();
const engine = new RecordingSttEngine();
const ts = await startService(t, { sttEngines: [engine] });

/** Glues consecutive messages into groups of `n` (several codec frames in one WebSocket message). */
function group(messages: readonly Uint8Array[], n: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < messages.length; i += n) {
    const parts = messages.slice(i, i + n);
    const m = new Uint8Array(parts.reduce((k, p) => k + p.length, 0));
    let at = 0;
    for (const p of parts) {
      m.set(p, at);
      at += p.length;
    }
    out.push(m);
  }
  return out;
}

interface Case {
  codec: Codec;
  rate: number;
  what: string;
  /** The input's duration in seconds and the messages a device sends for it. */
  make: () => { seconds: number; messages: Uint8Array[] };
}

const opusCase = (codec: 'opus' | 'opus_fs320', rate: number): Case => ({
  codec,
  rate,
  what: `one ${codec === 'opus' ? 10 : 20} ms packet per message`,
  make: () => {
    const pcm = speech(dir, rate, PHRASE);
    const enc = new OpusEncoderStream(rate);
    return { seconds: pcm.length / rate, messages: frames(pcm, codec === 'opus' ? rate / 100 : rate / 50).map((f) => enc.encode(f)) };
  },
});

const cases: Case[] = [
  {
    codec: 'pcm8',
    rate: 8000,
    what: '20 ms chunks',
    make: () => {
      const pcm = speech(dir, 8000, PHRASE);
      return { seconds: pcm.length / 8000, messages: pcmMessages(pcm, 160) };
    },
  },
  {
    codec: 'pcm16',
    rate: 16000,
    what: '100 ms chunks',
    make: () => {
      const pcm = speech(dir, 16000, PHRASE);
      return { seconds: pcm.length / 16000, messages: pcmMessages(pcm, 1600) };
    },
  },
  opusCase('opus', 16000),
  opusCase('opus_fs320', 16000),
  {
    codec: 'lc3_fs1030',
    rate: 16000,
    what: 'three 30-byte frames per message (one BLE notification)',
    make: () => {
      const pcm = speech(dir, 16000, PHRASE);
      const { frames: f } = elc3(dir, pcm, 16000, 24000);
      if (f.some((x) => x.length !== 30)) throw new Error('elc3 at 24 kbps should write 30-byte frames');
      return { seconds: pcm.length / 16000, messages: group(f, 3) };
    },
  },
  {
    codec: 'lc3',
    rate: 48000,
    what: 'one frame per message, frame sizes varying 60–120 bytes',
    make: () => {
      const pcm = speech(dir, 48000, PHRASE);
      const enc = new Lc3Encoder(10000, 48000);
      const sizes = [60, 80, 100, 120];
      return { seconds: pcm.length / 48000, messages: frames(pcm, 480).map((f, i) => enc.encode(f, sizes[i % 4]!)) };
    },
  },
  {
    codec: 'aac',
    rate: 44100,
    what: 'two ADTS frames per message',
    make: () => {
      const pcm = speech(dir, 44100, PHRASE);
      return { seconds: pcm.length / 44100, messages: group(aacAdts(dir, pcm, 44100), 2) };
    },
  },
];

/** Opens a session for `uid` and returns it with its (new) recording STT streams. */
async function session(uid: string, query: Record<string, string>): Promise<{ c: ListenClient; streams: RecordingSttStream[] }> {
  const before = engine.streams.length;
  const c = await open(ts, { uid, ...query });
  await c.ready();
  return { c, streams: engine.streams.slice(before) };
}

/** Closes the client and waits until the session drained: every accepted message decoded, STT finalised and closed. */
async function closeAndDrain(uid: string, c: ListenClient, streams: RecordingSttStream[]): Promise<void> {
  c.close();
  await c.closed;
  await until(() => streams.every((s) => s.finalized && s.closed), { what: 'STT finalised and closed', timeoutMs: 20_000 });
  await until(() => ts.service.sessions.sessionsOf(uid).length === 0, { what: 'session gone', timeoutMs: 5000 });
}

const check16k = (s: RecordingSttStream): boolean => s.options.sampleRateHz === 16000 && s.chunks.every((ch) => ch instanceof Int16Array);

for (const c of cases) {
  t.test(`${c.codec} at ${c.rate} Hz (${c.what}): 16 kHz PCM of the input's duration reaches STT`, async (t) => {
    const { seconds, messages } = c.make();
    const uid = `u-${c.codec}`;
    const { c: client, streams } = await session(uid, { codec: c.codec, sample_rate: String(c.rate) });
    t.equal(streams.length, 1, 'one STT stream');
    const actor = ts.service.sessions.sessionsOf(uid)[0]!;
    for (const m of messages) client.ws.send(m);
    await until(() => actor.stats.audioMessages === messages.length, { what: 'every message received', timeoutMs: 10_000 });
    await closeAndDrain(uid, client, streams);
    const s = streams[0]!;
    t.ok(check16k(s), '16 kHz Int16 PCM');
    const got = s.samples / 16000;
    t.ok(Math.abs(got - seconds) / seconds <= 0.02, `STT got ${got.toFixed(3)} s of ${seconds.toFixed(3)} s (${messages.length} messages)`);
    t.equal(actor.stats.corruptFrames, 0, 'no corrupt frames');
    t.ok(concat(s.chunks).some((v) => Math.abs(v) > 1000), 'speech, not silence');
  });
}

t.test('channels=2 (opus_fs320): each channel reaches its own STT stream', async (t) => {
  const uid = 'u-stereo';
  const enc1 = new OpusEncoderStream(16000);
  const enc2 = new OpusEncoderStream(16000);
  // Different tones and lengths per channel, so a mix-up shows in both.
  const one = frames(sine(300, 16000, 2, 8000), 320).map((f) => onChannel(1, enc1.encode(f)));
  const two = frames(sine(1200, 16000, 3, 8000), 320).map((f) => onChannel(2, enc2.encode(f)));
  const messages = two.flatMap((m, i) => (one[i] ? [one[i]!, m] : [m]));
  const { c, streams } = await session(uid, { codec: 'opus_fs320', sample_rate: '16000', channels: '2' });
  t.equal(streams.length, 2, 'one STT stream per channel');
  for (const m of messages) c.ws.send(m);
  await closeAndDrain(uid, c, streams);
  const [s1, s2] = streams as [RecordingSttStream, RecordingSttStream];
  t.ok(check16k(s1) && check16k(s2), '16 kHz Int16 PCM on both');
  t.ok(Math.abs(s1.samples / 16000 - 2) <= 0.04, `channel 1: ${(s1.samples / 16000).toFixed(3)} s of 2 s`);
  t.ok(Math.abs(s2.samples / 16000 - 3) <= 0.06, `channel 2: ${(s2.samples / 16000).toFixed(3)} s of 3 s`);
  t.ok(Math.abs(tone(concat(s1.chunks).subarray(1600), 16000).hz - 300) < 10, 'channel 1 carries the 300 Hz tone');
  t.ok(Math.abs(tone(concat(s2.chunks).subarray(1600), 16000).hz - 1200) < 15, 'channel 2 carries the 1200 Hz tone');
});

t.test('corrupt frames are counted and skipped; the session stays open and later audio still arrives', async (t) => {
  const uid = 'u-corrupt';
  const enc = new OpusEncoderStream(16000);
  const before = frames(sine(440, 16000, 1, 8000), 320).map((f) => enc.encode(f));
  const after = frames(sine(440, 16000, 1, 8000), 320).map((f) => enc.encode(f));
  const garbage = (n: number, seed: number): Uint8Array => new Uint8Array(n).map((_, i) => (i * 37 + seed * 101) & 0xff);
  const { c, streams } = await session(uid, { codec: 'opus_fs320', sample_rate: '16000' });
  const s = streams[0]!;
  const actor = ts.service.sessions.sessionsOf(uid)[0]!;
  for (const m of before) c.ws.send(m);
  c.ws.send(garbage(40, 1));
  c.ws.send(garbage(3, 2));
  await until(() => actor.stats.corruptFrames === 2, { what: 'both garbage messages counted as corrupt', timeoutMs: 10_000 });
  await until(() => s.samples >= 16000, { what: 'the good second decoded', timeoutMs: 10_000 });
  t.equal(actor.stats.audioMessages, before.length + 2, 'garbage arrived as audio messages');
  t.equal(c.ws.readyState, c.ws.OPEN, 'the socket is still open');
  t.equal(actor.state, 'streaming', 'the session is still streaming');
  const samplesBefore = s.samples;

  for (const m of after) c.ws.send(m);
  await until(() => s.samples >= samplesBefore + 16000, { what: 'audio after the garbage decoded', timeoutMs: 10_000 });
  t.equal(actor.stats.corruptFrames, 2, 'good packets after the garbage are not corrupt');
  // Concealment may add at most one frame per corrupt packet.
  t.ok(s.samples <= 2 * 16000 + 2 * 320, `${s.samples} samples: the garbage was skipped (or concealed), not decoded as audio`);
  t.ok(Math.abs(tone(concat(s.chunks).subarray(s.samples - 8000), 16000).hz - 440) < 10, 'the tone after the garbage is intact');
  await closeAndDrain(uid, c, streams);
});

t.test('sessions decoded on the main thread (the inline shard) give STT the samples a codec shard gives', async (t) => {
  const inlineEngine = new RecordingSttEngine();
  const inline = await startService(t, { sttEngines: [inlineEngine], tuning: { inlineBusyPct: 100 } });
  for (const c of [cases.find((x) => x.codec === 'opus_fs320')!, cases.find((x) => x.codec === 'aac')!]) {
    const { messages } = c.make();
    const query = { codec: c.codec, sample_rate: String(c.rate) };
    // The same audio through this file's service (codec shards) and through one that decodes on its main thread.
    const shardUid = `u-shard-${c.codec}`;
    const onShard = await session(shardUid, query);
    const before = inlineEngine.streams.length;
    const mainUid = `u-main-${c.codec}`;
    const client = await open(inline, { uid: mainUid, ...query });
    await client.ready();
    const mainStreams = inlineEngine.streams.slice(before);
    const metrics = (await inline.req('/metrics')).text;
    t.match(metrics, /^codec_sessions\{thread="main"\} 1$/m, 'counted on the main thread');
    t.match(metrics, /^codec_sessions\{thread="0"\} 0$/m, 'not on a shard');
    t.match((await ts.req('/metrics')).text, /^codec_sessions\{thread="main"\} 0$/m, 'the default service decodes on its shards');
    for (const m of messages) {
      onShard.c.ws.send(m);
      client.ws.send(m);
    }
    await closeAndDrain(shardUid, onShard.c, onShard.streams);
    client.close();
    await client.closed;
    await until(() => mainStreams.every((s) => s.finalized && s.closed), { what: 'STT finalised and closed', timeoutMs: 20_000 });
    t.ok(mainStreams[0]!.samples > 16000 * 3, `${c.codec}: ${mainStreams[0]!.samples} samples`);
    t.same(concat(mainStreams[0]!.chunks), concat(onShard.streams[0]!.chunks), `${c.codec}: the same samples`);
  }
});
