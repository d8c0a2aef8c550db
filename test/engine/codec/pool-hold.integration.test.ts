// A codec stream held for its consumer (CodecStream.holdUntil): audio is decoded in one batch once it completes what the
// consumer waits for, a held stream never delays another, an unmet hold runs out, and close() decodes what is held.
import t, { type Test } from 'tap';
import { once } from 'node:events';
import { CodecPool, type CodecStream } from '../../../engine/codec/pool.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';

/** 20 ms opus_fs320 packets of a tone. */
function packets(n: number): Uint8Array[] {
  const enc = new OpusEncoderStream(16000);
  return frames(sine(440, 16000, (n * 20) / 1000, 8000), 320).map((f) => enc.encode(f));
}

/** Every PCM batch the stream emits (channel 1 lengths). */
function batches(stream: CodecStream): number[] {
  const out: number[] = [];
  stream.on('pcm', (pcm) => out.push(pcm[0]!.length));
  return out;
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

t.test('held for 100 ms, five 20 ms packets decode as one batch when the fifth arrives; tasks in between leave them', async (t) => {
  const [held, other] = await openStreams(t, 60_000, 'held', 'other');
  const got = batches(held);
  const p = packets(10);
  held.holdUntil(1600);
  for (const m of p.slice(0, 4)) {
    held.push(m);
    await roundTrip(other, m); // a task ran after each packet: the held stream was not in it
  }
  t.same(got, [], 'four packets (1,280 samples) wait');
  t.equal(held.stats.tasks, 0);
  const first = once(held, 'pcm');
  held.push(p[4]!);
  await first;
  t.same(got, [1600], 'the fifth completes the hold: one batch of 100 ms');
  t.equal(held.stats.tasks, 1);
  // The consumer now lacks 320 samples: the next packet goes alone.
  held.holdUntil(320);
  const second = once(held, 'pcm');
  held.push(p[5]!);
  await second;
  t.same(got, [1600, 320]);
  // Without a hold every packet goes in the next task, as before.
  held.holdUntil(0);
  const third = once(held, 'pcm');
  held.push(p[6]!);
  await third;
  t.same(got, [1600, 320, 320]);
  t.equal(held.stats.frames, 7);
});

t.test('a held stream does not hold back a stream whose audio is due, nor does its timer', async (t) => {
  // With an hour-long hold, a due stream that waited for the held one's timer would time the test out.
  const [held, due] = await openStreams(t, 3_600_000, 'held', 'due');
  const got = batches(held);
  const p = packets(6);
  held.holdUntil(1600);
  held.push(p[0]!); // staged first: the shard's timer now waits for this hold to run out
  due.holdUntil(640);
  due.push(p[1]!);
  const done = once(due, 'pcm');
  due.push(p[2]!); // completes its hold
  const [pcm] = (await done) as [Int16Array[]];
  t.equal(pcm[0]!.length, 640, 'the due stream decoded both its packets at once');
  t.same(got, [], 'the held one still waits');
  t.equal(held.pendingBytes, p[0]!.length, 'its packet is still staged');
});

t.test('an unmet hold runs out after maxHoldMs: what is staged is decoded anyway', async (t) => {
  const [held] = await openStreams(t, 30, 'paused');
  held.holdUntil(1600);
  const p = packets(3);
  const got = once(held, 'pcm');
  for (const m of p) held.push(m); // the device pauses after three packets
  const [pcm] = (await got) as [Int16Array[]];
  t.equal(pcm[0]!.length, 960, 'three packets, in one batch');
});

t.test('close() decodes held audio at once; close without flush drops it', async (t) => {
  const [flushed, dropped] = await openStreams(t, 3_600_000, 'flushed', 'dropped');
  const a = batches(flushed);
  const b = batches(dropped);
  const p = packets(2);
  for (const s of [flushed, dropped]) {
    s.holdUntil(1600);
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
  // Two 20 ms packets complete a 40 ms hold (the hour-long timer never fires).
  one.holdUntil(640);
  const got = once(one, 'pcm');
  one.push(p[0]!);
  await new Promise((r) => setImmediate(r));
  t.equal(one.stats.tasks, 0, 'held: one packet holds 20 ms');
  one.push(p[1]!);
  t.equal(((await got) as [Int16Array[]])[0][0]!.length, 640, 'decoded once the second packet came');
  // Two channels: a second-channel message adds nothing to the timeline; the first channel's does.
  two.holdUntil(320);
  const both = once(two, 'pcm');
  two.push(new Uint8Array([0x02, ...p[1]!]));
  await new Promise((r) => setImmediate(r));
  t.equal(two.stats.tasks, 0, 'a second-channel message alone does not complete the hold');
  two.push(new Uint8Array([0x01, ...p[2]!]));
  const [pcm] = (await both) as [Int16Array[]];
  t.same(pcm.map((c) => c.length), [320, 320], 'both channels decoded together once the first channel’s 20 ms came');
});

t.test('onSend sees each message as the task that decodes it leaves, in order, not as it is pushed', async (t) => {
  const pool = new CodecPool({ threads: 1, maxHoldMs: 3_600_000 });
  t.teardown(() => pool.close());
  const s = pool.open({ sessionId: 'sent', codec: 'opus_fs320', sampleRate: 16000, channels: 1 });
  await s.ready;
  const sent: number[][] = [];
  s.onSend = (m) => sent.push([...m]);
  const p = packets(3);
  s.holdUntil(960);
  const lent = p[0]!.slice();
  s.push(lent);
  lent.fill(0); // the caller's buffer is free once push() returns
  s.push(p[1]!);
  await new Promise((r) => setImmediate(r));
  t.same(sent, [], 'nothing yet: the hold keeps the task back');
  const got = once(s, 'pcm');
  s.push(p[2]!);
  t.equal(((await got) as [Int16Array[]])[0][0]!.length, 960, 'the three decoded in one task');
  t.same(sent, p.map((m) => [...m]), 'each message seen once, its own bytes, in order');
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
  held.holdUntil(16000);
  t0 = performance.now();
  const got = once(held, 'pcm');
  held.push(p[1]!);
  await got;
  const waitedS = (performance.now() - t0) / 1000;
  t.equal(delays.length, 2);
  t.ok(waitedS >= 0.3, `the packet waited out the 300 ms hold (${waitedS} s)`);
  t.ok(delays[1]! >= 0 && delays[1]! <= waitedS - 0.3, `${delays[1]} s counted from the hold running out`);
  t.equal(pool.taskStats.tasks, delays.length, 'every task reported');
});
