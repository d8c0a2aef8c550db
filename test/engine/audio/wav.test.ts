// WAV files: what encodeWav writes reads back the same; extra chunks, WAVE_FORMAT_EXTENSIBLE and streaming writers'
// unknown data sizes are read; files that do not add up are refused with a reason.
import t from 'tap';
import { encodeWav, isPcm16Mono, parseWav, samplesOf } from '../../../engine/audio/wav.js';

const pcm = Int16Array.from({ length: 1001 }, (_, i) => Math.round(10000 * Math.sin(i / 3)));

t.test('round trip', async (t) => {
  const wav = parseWav(encodeWav(pcm, 16000));
  t.ok(isPcm16Mono(wav, 16000));
  t.notOk(isPcm16Mono(wav, 8000));
  t.same(samplesOf(wav), pcm);
});

t.test('chunks before the data, the extensible format and an unknown data size', async (t) => {
  const plain = encodeWav(pcm, 16000);
  const list = Buffer.concat([Buffer.from('LIST'), Buffer.from([3, 0, 0, 0]), Buffer.from('abc\0')]);
  const withList = Buffer.concat([plain.subarray(0, 36), list, plain.subarray(36)]);
  t.same(samplesOf(parseWav(withList)), pcm, 'an odd-sized chunk and its pad byte are skipped');

  const ext = Buffer.alloc(40);
  plain.copy(ext, 0, 20, 36);
  ext.writeUInt16LE(0xfffe, 0);
  ext.writeUInt16LE(22, 16);
  ext.writeUInt16LE(1, 24);
  const extensible = Buffer.concat([plain.subarray(0, 12), Buffer.from('fmt '), Buffer.from([40, 0, 0, 0]), ext, plain.subarray(36)]);
  t.ok(isPcm16Mono(parseWav(extensible), 16000), 'WAVE_FORMAT_EXTENSIBLE with a PCM sub-format is PCM');

  const streamed = Buffer.from(plain);
  streamed.writeUInt32LE(0xffffffff, 40);
  t.same(samplesOf(parseWav(streamed)), pcm, 'a data size left unknown runs to the end');
});

t.test('refusals', async (t) => {
  const plain = encodeWav(pcm, 16000);
  const float = Buffer.from(plain);
  float.writeUInt16LE(3, 20);
  t.notOk(isPcm16Mono(parseWav(float), 16000), 'float samples are not PCM');
  t.throws(() => parseWav(Buffer.from('ID3 not a wav file')), { message: 'not a WAV file' });
  t.throws(() => parseWav(plain.subarray(0, 200)), { message: 'WAV data is cut short' });
  t.throws(() => parseWav(plain.subarray(0, 30)), { message: /fmt chunk is cut short/ });
  t.throws(() => parseWav(Buffer.concat([plain.subarray(0, 12), plain.subarray(36)])), { message: 'WAV data comes before its format' });
  t.throws(() => parseWav(plain.subarray(0, 36)), { message: 'WAV file has no data chunk' });
});
