// Duration of one encoded listen message from its bytes: PCM sizes, real Opus packets, real ADTS frames, LC3 frame counts.
import t from 'tap';
import { encodedDurationS } from '../../../engine/audio/encoded-duration.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { aacAdts, sine, onChannel } from '../../helpers/codec-fixtures.js';

t.test('pcm: two bytes per sample at the session rate', async (t) => {
  t.equal(encodedDurationS('pcm16', 16000, 1, new Uint8Array(3200)), 0.1);
  t.equal(encodedDurationS('pcm8', 8000, 1, new Uint8Array(1600)), 0.1);
  t.equal(encodedDurationS('pcm16', 16000, 1, new Uint8Array(3)), 1 / 16000, 'a dangling byte is not a sample');
});

t.test('opus: the TOC byte of real packets', async (t) => {
  const enc = new OpusEncoderStream(16000);
  for (const ms of [10, 20, 40, 60]) {
    const packet = enc.encode(sine(440, 16000, ms / 1000, 8000));
    t.equal(Math.round(encodedDurationS('opus', 16000, 1, packet) * 1000), ms, `${ms} ms packet`);
    t.equal(Math.round(encodedDurationS('opus_fs320', 16000, 1, packet) * 1000), ms);
  }
  t.equal(encodedDurationS('opus', 16000, 1, new Uint8Array(0)), 0, 'empty');
  // Code 3 (arbitrary frame count): CELT 20 ms (config 31) × 3 frames.
  t.equal(Math.round(encodedDurationS('opus', 16000, 1, new Uint8Array([(31 << 3) | 3, 3, 0, 0])) * 1000), 60);
});

t.test('aac: ADTS frames from ffmpeg, 1024 samples each', async (t) => {
  const frames = aacAdts(t.testdir(), sine(440, 16000, 1, 8000), 16000);
  const total = frames.reduce((s, f) => s + encodedDurationS('aac', 16000, 1, f), 0);
  // 1 s of input; the encoder adds its priming frame and pads the last one.
  t.ok(total >= 1 && total <= 1 + (3 * 1024) / 16000, `${frames.length} frames, ${total.toFixed(3)} s for 1 s of audio`);
  t.equal(encodedDurationS('aac', 16000, 1, new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])), 0, 'not ADTS');
});

t.test('lc3: 10 ms frames; lc3_fs1030 counts its 30-byte frames', async (t) => {
  t.equal(encodedDurationS('lc3', 16000, 1, new Uint8Array(40)), 0.01);
  t.equal(encodedDurationS('lc3_fs1030', 16000, 1, new Uint8Array(90)), 0.03);
  t.equal(encodedDurationS('lc3_fs1030', 16000, 1, new Uint8Array(29)), 0);
});

t.test('two channels: only channel 1 counts, without its channel byte', async (t) => {
  const pcm = new Uint8Array(3200);
  t.equal(encodedDurationS('pcm16', 16000, 2, onChannel(1, pcm)), 0.1);
  t.equal(encodedDurationS('pcm16', 16000, 2, onChannel(2, pcm)), 0);
  t.equal(encodedDurationS('speex', 16000, 1, pcm), 0, 'unknown codec');
});
