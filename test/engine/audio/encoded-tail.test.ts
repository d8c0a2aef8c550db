// The encoded tail keeps what the provider has not answered for (plus a warm-up), bounded, and copies what it keeps.
import t from 'tap';
import { EncodedTail, WARM_UP_SAMPLES } from '../../../engine/audio/encoded-tail.js';

/** Message i: 3 + (i % 5) bytes, every byte i & 0xff. */
const message = (i: number): Uint8Array => new Uint8Array(3 + (i % 5)).fill(i & 0xff);
const ids = (messages: readonly Uint8Array[]): number[] => messages.map((m) => m[0]!);

t.test('release drops what ends before the answered sample, less the warm-up; slice gives copies in order', async (t) => {
  const tail = new EncodedTail(1_000_000);
  const lent = new Uint8Array(64);
  for (let i = 0; i < 100; i++) {
    lent.set(message(i));
    tail.push(lent.subarray(0, message(i).length), 0.02);
  }
  lent.fill(0xee);
  t.equal(tail.messages, 100);
  tail.release(50 * 320);
  t.equal(tail.messages, 50 + WARM_UP_SAMPLES / 320, 'the 60 ms before the answered sample stay');
  const s = tail.slice(50 * 320, 100 * 320);
  t.equal(s.startSample, 50 * 320 - WARM_UP_SAMPLES);
  t.same(ids(s.messages), Array.from({ length: 53 }, (_, k) => 47 + k), 'messages 47..99, warm-up first');
  t.same(s.messages.map((m) => m.length), Array.from({ length: 53 }, (_, k) => 3 + ((47 + k) % 5)), 'each its own length');
  t.ok(s.messages.every((m, k) => m.every((b) => b === 47 + k)), 'copies of what was pushed, not of the lent buffer');
  t.same(ids(tail.slice(60 * 320, 61 * 320).messages), [57, 58, 59, 60], 'a slice ends with the last message that starts before `to`');
});

t.test('beyond the bound the oldest goes; a backlog shrinks its storage once answered', async (t) => {
  const tail = new EncodedTail(16000); // 1 s
  for (let i = 0; i < 500; i++) tail.push(new Uint8Array(200).fill(i & 0xff), 0.02);
  t.equal(tail.messages, 50, 'one second of 20 ms messages');
  t.equal(tail.bytes, 50 * 200);
  tail.release(500 * 320);
  t.equal(tail.messages, 3, 'the warm-up: the last 60 ms');
  for (let i = 0; i < 60; i++) tail.push(new Uint8Array(10), 0.02);
  t.ok(tail.bytes < 4096, `${tail.bytes} bytes held`);
});

t.test('positions are the running total of seconds: AAC frames of 341 1/3 samples do not drift', async (t) => {
  const tail = new EncodedTail(10_000_000);
  for (let i = 0; i < 3000; i++) tail.push(message(i), 1024 / 48000);
  // Frame 2999 starts at 2999 × 1024 / 3 samples of 16 kHz time, rounded; a slice whose warm-up begins there starts
  // with it (rounding each frame to 341 samples would have put it 1,000 samples early).
  const start = Math.round((2999 * 1024) / 3);
  t.equal(tail.slice(start + WARM_UP_SAMPLES, start + WARM_UP_SAMPLES + 1).startSample, start);
});

t.test('a stream answered every second: copies stay whole across moves, storage stays near what is live', async (t) => {
  const tail = new EncodedTail(10 * 16000);
  let peak = 0;
  let storage = 0;
  for (let i = 0; i < 3000; i++) {
    // Opus-like: 20 ms messages of 40 to 79 bytes, answered each second (50 messages) up to 400 ms before the end.
    tail.push(new Uint8Array(40 + (i % 40)).fill(i & 0xff), 0.02);
    if (i % 50 === 49) tail.release((i - 20) * 320);
    peak = Math.max(peak, tail.bytes + tail.messages * 12);
    storage = Math.max(storage, tail.storageBytes);
  }
  const s = tail.slice(2990 * 320, 3000 * 320);
  t.same(ids(s.messages), Array.from({ length: 13 }, (_, k) => (2987 + k) & 0xff), 'the last messages, warm-up first');
  t.ok(s.messages.every((m, k) => m.length === 40 + ((2987 + k) % 40) && m.every((b) => b === ((2987 + k) & 0xff))), 'each whole');
  // Live here is 0.4 to 1.4 s: storage follows its peak (~5.4 KiB with the entries), with a quarter more room.
  t.ok(storage <= 1.3 * peak, `storage ${storage} bytes for a peak of ${peak} live`);
});

t.test('a stream answered every 2 s, its peak beyond the minimum storage: the storage settles and is not reallocated', async (t) => {
  const tail = new EncodedTail(10 * 16000);
  const resizesAt: number[] = [];
  for (let i = 0; i < 100 * 30; i++) {
    // 20 ms messages of 40 to 79 bytes (2.2 s live at the peak: 110 messages, ~6.5 KB); answered every 2 s of audio
    // up to 200 ms before its end, so right after each answer only the warm-up and the last 200 ms are live.
    tail.push(new Uint8Array(40 + (i % 40)).fill(i & 0xff), 0.02);
    if (i % 100 === 99) {
      tail.release((i - 10) * 320);
      resizesAt.push(tail.resizes);
    }
  }
  const settled = resizesAt[4]!;
  t.equal(tail.resizes, settled, `no resize after the fifth answer (resizes after each answer: ${resizesAt.join(' ')})`);
  t.ok(tail.storageBytes <= 1.5 * (110 * 60 + 110 * 12), `storage ${tail.storageBytes} bytes`);
});
