// A codec stream held for its socket's send plan: audio decodes in one batch once it completes the next message, never
// delays another stream, goes when the hold runs out or the socket goes, and is kept encoded as its task leaves.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { CodecPool } from '../../../engine/codec/pool.js';
import type { CodecStream } from '../../../engine/codec/stream.js';
import type { ProviderSocket, SendPlan } from '../../../engine/codec/uplink.js';
import { EncodedTail } from '../../../engine/audio/encoded-tail.js';
import { listenUrl } from '../../../engine/stt/provider-a/protocol.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { startFakeDeepgram } from '../../fakes/deepgram-server.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';

const fake = await startFakeDeepgram({ sweepEveryMs: 0 });
t.teardown(() => fake.close());

/** 20 ms opus_fs320 packets of a tone. */
function packets(n: number): Uint8Array[] {
  const enc = new OpusEncoderStream(16000);
  return frames(sine(440, 16000, (n * 20) / 1000, 8000), 320).map((f) => enc.encode(f));
}

/** Every batch the stream's audio came out in (channel 1): sent on its socket by the shard, or answered here. */
function batches(stream: CodecStream): number[] {
  const out: number[] = [];
  stream.on('uplinked', (ch, n) => ch === 0 && out.push(n));
  stream.on('pcm', (pcm) => pcm[0]!.length > 0 && out.push(pcm[0]!.length));
  return out;
}

/** The next batch of channel 1, however it comes out. */
function nextBatch(stream: CodecStream): Promise<number> {
  return new Promise((resolve) => {
    const onUp = (ch: number, n: number): void => void (ch === 0 && done(n));
    const onPcm = (pcm: Int16Array[]): void => void (pcm[0]!.length > 0 && done(pcm[0]!.length));
    const done = (n: number): void => {
      stream.off('uplinked', onUp);
      stream.off('pcm', onPcm);
      resolve(n);
    };
    stream.on('uplinked', onUp);
    stream.on('pcm', onPcm);
  });
}

/** Opens a provider socket for `channel` in the stream's shard with `plan`, as a provider stream does. */
async function planned(stream: CodecStream, plan: Partial<SendPlan> & { firstSamples: number }, channel = 0): Promise<ProviderSocket> {
  const socket = stream.socket(channel);
  socket.listen({ text: () => undefined, close: () => undefined, stuck: () => undefined });
  const url = listenUrl(fake.url, 'nova-3', 'en', []);
  const a = await socket.open({ url, headers: { Authorization: 'Token test-key' }, maxPayload: 1 << 20, maxBufferedBytes: 1 << 20 }, { messageSamples: 1600, minSamples: 320, ...plan });
  if (!a.ok) throw new Error(a.why);
  return socket;
}

/** A one-thread pool with `maxHoldMs`, closed with the test, and an opus_fs320 stream per name, ready. */
async function openStreams<N extends string[]>(t: Test, maxHoldMs: number, ...names: N): Promise<{ [K in keyof N]: CodecStream }> {
  const pool = new CodecPool({ threads: 1, maxHoldMs });
  t.teardown(() => pool.close());
  const streams = names.map((sessionId) => pool.open({ sessionId, codec: 'opus_fs320', sampleRate: 16000, channels: 1 }));
  await Promise.all(streams.map((s) => s.ready));
  return streams as { [K in keyof N]: CodecStream };
}

/** A stream that is never held: a task that decodes its packet has come and gone once this resolves. */
async function roundTrip(stream: CodecStream, packet: Uint8Array): Promise<void> {
  const got = once(stream, 'pcm');
  stream.push(packet);
  await got;
}

t.test('a first message of 100 ms, then 20 ms ones: five packets decode as one batch when the fifth arrives, then one each', async (t) => {
  const [held, other] = await openStreams(t, 60_000, 'held', 'other');
  const got = batches(held);
  const socket = await planned(held, { firstSamples: 1600, messageSamples: 320 });
  const p = packets(10);
  for (const m of p.slice(0, 4)) {
    held.push(m);
    await roundTrip(other, m); // a task ran after each packet: the held stream was not in it
  }
  t.same(got, [], 'four packets (1,280 samples) wait');
  t.equal(held.stats.tasks, 0);
  const first = nextBatch(held);
  held.push(p[4]!);
  t.equal(await first, 1600, 'the fifth completes the first message: one batch of 100 ms, sent by the shard');
  t.equal(held.stats.tasks, 1);
  // The socket has taken audio: every message from now on is the plan's 20 ms, so the next packet goes alone.
  const second = nextBatch(held);
  held.push(p[5]!);
  t.equal(await second, 320);
  // The socket gone, nothing holds the audio back: every packet goes in the next task, answered here.
  socket.terminate();
  const third = once(held, 'pcm');
  held.push(p[6]!);
  t.equal(((await third) as [Int16Array[]])[0][0]!.length, 320);
  t.same(got, [1600, 320, 320]);
  t.equal(held.stats.frames, 7);
});

t.test('a held stream does not hold back a stream whose audio is due, nor does its timer', async (t) => {
  // With an hour-long hold, a due stream that waited for the held one's timer would time the test out.
  const [held, due] = await openStreams(t, 3_600_000, 'held', 'due');
  await planned(held, { firstSamples: 1600 });
  await planned(due, { firstSamples: 640 });
  const got = batches(held);
  const p = packets(6);
  held.push(p[0]!); // staged first: the shard's timer now waits for this hold to run out
  due.push(p[1]!);
  const done = nextBatch(due);
  due.push(p[2]!); // completes its first message
  t.equal(await done, 640, 'the due stream decoded both its packets at once');
  t.same(got, [], 'the held one still waits');
  t.equal(held.pendingBytes, p[0]!.length, 'its packet is still staged');
});

t.test('an unmet hold runs out after maxHoldMs: what is staged is decoded anyway', async (t) => {
  const [held] = await openStreams(t, 30, 'paused');
  await planned(held, { firstSamples: 1600 });
  const p = packets(3);
  const got = nextBatch(held);
  for (const m of p) held.push(m); // the device pauses after three packets
  t.equal(await got, 960, 'three packets, in one batch');
});

t.test('close() decodes held audio at once; close without flush drops it', async (t) => {
  const [flushed, dropped] = await openStreams(t, 3_600_000, 'flushed', 'dropped');
  const a = batches(flushed);
  const b = batches(dropped);
  const p = packets(2);
  for (const s of [flushed, dropped]) {
    await planned(s, { firstSamples: 1600 });
    for (const m of p) s.push(m);
  }
  await flushed.close();
  t.equal(a.reduce((x, y) => x + y, 0), 640, 'both packets decoded before close() resolved');
  await dropped.close({ flush: false });
  t.same(b, [], 'nothing decoded');
  t.equal(dropped.stats.lostMessages, 0, 'dropping on request is not a loss');
});

t.test('a hold counts the seconds read from the bytes, and for two channels only the first channel’s', async (t) => {
  const pool = new CodecPool({ threads: 1, maxHoldMs: 3_600_000 });
  t.teardown(() => pool.close());
  const one = pool.open({ sessionId: 'told', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  const two = pool.open({ sessionId: 'stereo', codec: 'opus_fs320', sampleRate: 16000, channels: 2 });
  await Promise.all([one.ready, two.ready]);
  const p = packets(4);
  // Two 20 ms packets complete a 40 ms first message (the hour-long timer never fires).
  await planned(one, { firstSamples: 640 });
  const got = nextBatch(one);
  one.push(p[0]!);
  await new Promise((r) => setImmediate(r));
  t.equal(one.stats.tasks, 0, 'held: one packet holds 20 ms');
  one.push(p[1]!);
  t.equal(await got, 640, 'decoded once the second packet came');
  // Two channels: a second-channel message adds nothing to the timeline; the first channel's does.
  await planned(two, { firstSamples: 320 }, 0);
  await planned(two, { firstSamples: 320 }, 1);
  const sent: [number, number][] = [];
  two.on('uplinked', (ch, n) => sent.push([ch, n]));
  two.push(new Uint8Array([0x02, ...p[1]!]));
  await new Promise((r) => setImmediate(r));
  t.equal(two.stats.tasks, 0, 'a second-channel message alone does not complete the hold');
  const both = once(two, 'uplinked');
  two.push(new Uint8Array([0x01, ...p[2]!]));
  await both;
  t.equal(two.stats.tasks, 1);
  t.same(sent.sort(), [[0, 320], [1, 320]], 'both channels decoded together once the first channel’s 20 ms came');
});

t.test('keepEncoded() keeps each message as the task that decodes it leaves, in order, not as it is pushed', async (t) => {
  const [s] = await openStreams(t, 3_600_000, 'kept');
  await planned(s, { firstSamples: 960, messageSamples: 320 });
  const tail = new EncodedTail(16000);
  s.keepEncoded([tail]);
  const p = packets(3);
  const lent = p[0]!.slice();
  s.push(lent);
  lent.fill(0); // the caller's buffer is free once push() returns
  s.push(p[1]!);
  await new Promise((r) => setImmediate(r));
  t.equal(tail.messages, 0, 'nothing yet: the hold keeps the task back');
  const got = nextBatch(s);
  s.push(p[2]!);
  t.equal(await got, 960, 'the three decoded in one task');
  const kept = tail.slice(0, 960);
  t.same(kept.messages.map((m) => [...m]), p.map((m) => [...m]), 'each message kept once, its own bytes, in order');
  t.equal(kept.startSample, 0);
  s.keepEncoded(undefined);
  const next = nextBatch(s);
  s.push(packets(1)[0]!);
  await next;
  t.equal(tail.messages, 3, 'nothing kept once it stopped');
});

t.test('keepEncoded() keeps two channels apart by their id byte, taken off; a message of neither is not kept', async (t) => {
  const pool = new CodecPool({ threads: 1 });
  t.teardown(() => pool.close());
  const s = pool.open({ sessionId: 'kept-2ch', codec: 'opus_fs320', sampleRate: 16000, channels: 2 });
  const tails = [new EncodedTail(16000), new EncodedTail(16000)];
  s.keepEncoded(tails);
  const p = packets(2);
  const decoded = once(s, 'pcm');
  for (const m of [Uint8Array.of(0x01, ...p[0]!), Uint8Array.of(0x02, ...p[1]!), Uint8Array.of(0x03, ...p[1]!)]) s.push(m);
  await decoded;
  t.same(tails.map((x) => x.slice(0, 320).messages.map((m) => [...m])), [[[...p[0]!]], [[...p[1]!]]]);
});

t.test('each decode task reports its audio’s delay from due to decoded, a hold’s own wait not included', async (t) => {
  const delays: number[] = [];
  const pool = new CodecPool({ threads: 1, maxHoldMs: 300, onTaskDelay: (s) => delays.push(s) });
  t.teardown(() => pool.close());
  const held = pool.open({ sessionId: 'held', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  const due = pool.open({ sessionId: 'due', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  await Promise.all([held.ready, due.ready]);
  const p = packets(2);
  // Due at once: its delay is at most the whole round trip.
  let t0 = performance.now();
  await roundTrip(due, p[0]!);
  const roundTripS = (performance.now() - t0) / 1000;
  t.equal(delays.length, 1, 'one task, one report');
  t.ok(delays[0]! >= 0 && delays[0]! <= roundTripS, `${delays[0]} s within the ${roundTripS} s round trip`);
  // Never completes its hold: it goes once the hold runs out, and only the time after that counts.
  await planned(held, { firstSamples: 16000 });
  t0 = performance.now();
  const got = nextBatch(held);
  held.push(p[1]!);
  await got;
  const waitedS = (performance.now() - t0) / 1000;
  t.equal(delays.length, 2);
  t.ok(waitedS >= 0.3, `the packet waited out the 300 ms hold (${waitedS} s)`);
  t.ok(delays[1]! >= 0 && delays[1]! <= waitedS - 0.3, `${delays[1]} s counted from the hold running out`);
  t.equal(pool.taskStats.tasks, delays.length, 'every task reported');
});
