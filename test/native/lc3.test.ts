// The LC3 addon is bit-exact with dlc3, conceals lost frames and takes the frame size from each call.
import t from 'tap';
import { Lc3Decoder, Lc3Encoder } from '../../native/index.js';
import { concat, dlc3, elc3, frames, speech } from '../helpers/codec-fixtures.js';
import { mallocStats } from '../../native/memory.js';

t.test('decoding elc3 output is bit-exact with dlc3', async (t) => {
  const dir = t.testdir();
  for (const rate of [16000, 48000]) {
    const pcm = speech(dir, rate).subarray(0, rate * 2);
    const { file, frames: lc3Frames } = elc3(dir, pcm, rate, rate === 16000 ? 24000 : 64000);
    const reference = dlc3(dir, file);
    const dec = new Lc3Decoder(10000, rate);
    const ours = concat(lc3Frames.map((f) => dec.decode(f)));
    // dlc3 drops the codec's algorithmic delay at the start; find it, then every sample must match.
    let offset = -1;
    for (let d = 0; d <= dec.frameSamples && offset < 0; d++) {
      if (reference.every((v, i) => ours[d + i] === v)) offset = d;
    }
    t.ok(offset >= 0, `${rate} Hz: bit-exact at delay ${offset} (${reference.length} samples)`);
  }
});

t.test('null or empty frames are concealed; frame size varies per call; bad sizes throw', async (t) => {
  const dir = t.testdir();
  const pcm = speech(dir, 16000).subarray(0, 16000);
  const enc = new Lc3Encoder(10000, 16000);
  const dec = new Lc3Decoder(10000, 16000);
  t.equal(dec.frameSamples, 160);
  const sizes = [30, 40, 60, 20, 100];
  const out = frames(pcm, 160).map((f, i) => dec.decode(enc.encode(f, sizes[i % sizes.length]!)));
  t.ok(out.every((f) => f.length === 160));
  t.notOk(dec.concealed);
  const lost = dec.decode(null);
  t.equal(lost.length, 160);
  t.ok(dec.concealed);
  dec.decode(new Uint8Array(0));
  t.ok(dec.concealed);
  t.throws(() => dec.decode(new Uint8Array(10)), { code: 'ERR_LC3_FRAME_SIZE' });
  t.throws(() => new Lc3Decoder(10000, 44100), { code: 'ERR_LC3_ARGS' });
  // Still usable after all that.
  dec.decode(enc.encode(frames(pcm, 160)[0]!, 30));
  t.notOk(dec.concealed);
});

t.test('release() frees the liblc3 state before any GC, once, and the handle is dead after', { skip: mallocStats() === undefined && 'malloc statistics need glibc and the memory addon' }, async (t) => {
  const before = mallocStats()!.inUseBytes;
  // 48 kHz decoders: the largest liblc3 state.
  const live = Array.from({ length: 200 }, () => new Lc3Decoder(10000, 48000));
  const held = mallocStats()!.inUseBytes - before;
  t.ok(held > 200 * 4096, `200 decoders hold ${held} bytes of malloc`);
  const mid = mallocStats()!.inUseBytes;
  for (const d of live) d.release();
  for (const d of live) d.release();
  // Synchronously, so no GC can have run the finalizers: only release() can have freed them.
  const freed = mid - mallocStats()!.inUseBytes;
  t.ok(freed > held * 0.9, `released, ${freed} bytes went back to malloc at once`);
  t.throws(() => live[0]!.decode(null), { code: 'ERR_LC3_ARGS' }, 'the released handle is dead');
  const fresh = new Lc3Decoder(10000, 48000);
  t.equal(fresh.decode(null).length, 480, 'a new decoder works');
  fresh.release();
});
