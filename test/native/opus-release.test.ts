// A released Opus decoder gives its native state back at once: malloc has it before any GC, and the handle is dead.
import t from 'tap';
import { OpusDecoder, OpusEncoderStream, OPUS_DECODER_BYTES } from '../../native/opus.js';
import { mallocStats } from '../../native/memory.js';

/** 1 s of a 440 Hz tone with a little noise, as 20 ms packets. */
function packets(seed: number): Uint8Array[] {
  const enc = new OpusEncoderStream(16000);
  const out: Uint8Array[] = [];
  let x = seed;
  for (let f = 0; f < 50; f++) {
    const pcm = new Int16Array(320);
    for (let i = 0; i < 320; i++) {
      x = (x * 1103515245 + 12345) & 0x7fffffff;
      pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * (f * 320 + i)) / 16000)) + ((x % 2000) - 1000);
    }
    out.push(enc.encode(pcm));
  }
  return out;
}

const decodeAll = (d: OpusDecoder, ps: Uint8Array[]): number[] => ps.flatMap((p) => Array.from(d.decode(p)));

const noStats = mallocStats() === undefined && 'malloc statistics need glibc and the memory addon';

t.test('release() frees the libopus state before any GC, once, and the handle is dead after', { skip: noStats }, async (t) => {
  const ps = packets(1).slice(0, 5);
  const before = mallocStats()!;
  const live = Array.from({ length: 200 }, () => new OpusDecoder(16000));
  for (const d of live) decodeAll(d, ps);
  const held = mallocStats()!.inUseBytes - before.inUseBytes;
  // malloc's count is the process's: V8's helper threads free and allocate meanwhile, so allow a fifth either way.
  t.ok(held >= 200 * OPUS_DECODER_BYTES * 0.8, `200 decoders hold ${held} bytes of malloc (${OPUS_DECODER_BYTES} each)`);
  const mid = mallocStats()!.inUseBytes;
  for (const d of live) d.release();
  for (const d of live) d.release();
  const freed = mid - mallocStats()!.inUseBytes;
  // Synchronously, so no GC can have run the finalizers: only release() can have freed them.
  t.ok(freed >= 200 * OPUS_DECODER_BYTES * 0.8, `released, ${freed} bytes went back to malloc at once`);
  t.throws(() => live[0]!.decode(ps[0]!), /after release/, 'the released handle is dead');
});

t.test('a decoder made after others were released decodes exactly as the first one did', async (t) => {
  const a = packets(2);
  const first = new OpusDecoder(16000);
  const expected = decodeAll(first, a);
  first.release();
  for (let i = 0; i < 100; i++) new OpusDecoder(16000).release();
  const later = new OpusDecoder(16000);
  t.same(decodeAll(later, a), expected, 'identical samples');
  later.release();
});
