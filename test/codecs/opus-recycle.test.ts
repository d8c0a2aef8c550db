// Released Opus decoders are reset and reused: a reused one decodes exactly as a new one, and churn does not grow them.
import t from 'tap';
import { OpusDecoder, OpusEncoderStream, spareOpusDecoders } from '../../native/opus.js';

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

t.test('a released decoder is reset: reused, it decodes a new stream exactly as a fresh decoder does', async (t) => {
  const a = packets(1);
  const b = packets(2);
  const fresh = decodeAll(new OpusDecoder(16000), b);
  const used = new OpusDecoder(16000);
  decodeAll(used, a);
  const before = spareOpusDecoders();
  used.release();
  used.release();
  t.equal(spareOpusDecoders(), before + 1, 'kept once for reuse');
  const reused = new OpusDecoder(16000);
  t.equal(spareOpusDecoders(), before, 'taken from the spares');
  t.same(decodeAll(reused, b), fresh, 'identical samples');
  t.throws(() => used.decode(b[0]!), /after release/, 'the released handle is dead');
  reused.release();
});

t.test('sessions coming and going reuse the same few decoders', async (t) => {
  const ps = packets(3).slice(0, 5);
  const start = spareOpusDecoders();
  for (let i = 0; i < 1000; i++) {
    const live = [new OpusDecoder(16000), new OpusDecoder(16000)];
    for (const d of live) decodeAll(d, ps);
    for (const d of live) d.release();
  }
  t.ok(spareOpusDecoders() <= Math.max(start, 2), `spares ${spareOpusDecoders()} after 2,000 sessions two at a time`);
});
