// The resampler keeps tones, attenuates what would alias, and is the same chunked or in one pass.
import { loadAddon } from '../../native/addon.js';
import t from 'tap';
import { Resampler } from '../../workers/resample.js';
import { concat, sine, tone } from '../helpers/codec-fixtures.js';

const RATES = [8000, 12000, 24000, 44100, 48000];

t.test('a 1 kHz sine keeps its frequency and amplitude', async (t) => {
  for (const rate of RATES) {
    const r = new Resampler(rate, 16000);
    const out = concat([r.push(sine(1000, rate, 1, 10000)), r.flush()]);
    t.ok(Math.abs(out.length - 16000) <= 2, `${rate}: length ${out.length}`);
    // Skip the filter's edges.
    const mid = tone(out.subarray(800, 15200), 16000);
    t.ok(Math.abs(mid.hz - 1000) < 2, `${rate}: ${mid.hz.toFixed(1)} Hz`);
    t.ok(Math.abs(mid.amplitude - 10000) / 10000 < 0.01, `${rate}: amplitude ${mid.amplitude.toFixed(0)}`);
  }
});

t.test('a tone above 8 kHz is attenuated by more than 40 dB', async (t) => {
  for (const [rate, hz] of [[48000, 12000], [44100, 10000], [24000, 9000], [48000, 8800]] as const) {
    const r = new Resampler(rate, 16000);
    const out = r.push(sine(hz, rate, 1, 20000)).subarray(800, 15000);
    const { amplitude } = tone(out, 16000);
    const db = 20 * Math.log10(amplitude / 20000);
    t.ok(db < -40, `${rate} Hz input, ${hz} Hz tone: ${db.toFixed(1)} dB`);
  }
});

t.test('chunked output equals one-pass output, sample for sample', async (t) => {
  for (const rate of [...RATES, 16000]) {
    const input = sine(440, rate, 0.5, 8000).map((v, i) => v + ((i * 7919) % 2001) - 1000);
    const one = new Resampler(rate, 16000);
    const whole = concat([one.push(input), one.flush()]);
    const chunked = new Resampler(rate, 16000);
    const parts: Int16Array[] = [];
    for (let i = 0, step = 1; i < input.length; i += step, step = (step * 3 + 1) % 337 + 1) {
      parts.push(chunked.push(input.slice(i, i + step)));
    }
    parts.push(chunked.flush());
    t.same(concat(parts), whole, `${rate}`);
  }
});

t.test('the native inner loop refuses a state that would read outside its arrays', async (t) => {
  const { resampleRun } = loadAddon<{ resampleRun: (...args: unknown[]) => number }>('dsp', 'DSP');
  const coeffs = new Float32Array(3 * 8);
  const hist = new Float32Array(64);
  const out = new Int16Array(16);
  t.equal(resampleRun(coeffs, 8, 3, 1, hist, 64, new Int32Array([3, 0]), out), 16, 'a valid state runs');
  for (const [why, args] of [
    ['pos reaching before the history', [coeffs, 8, 3, 1, hist, 64, new Int32Array([2, 0]), out]],
    ['phase past the bank', [coeffs, 8, 3, 1, hist, 64, new Int32Array([3, 3]), out]],
    ['avail past the history', [coeffs, 8, 3, 1, hist, 65, new Int32Array([3, 0]), out]],
    ['a bank shorter than up × taps', [coeffs, 8, 4, 1, hist, 64, new Int32Array([3, 0]), out]],
    ['an odd tap count', [coeffs, 7, 3, 1, hist, 64, new Int32Array([3, 0]), out]],
    ['history of the wrong type', [coeffs, 8, 3, 1, new Int16Array(64), 64, new Int32Array([3, 0]), out]],
  ] as const) {
    t.throws(() => resampleRun(...args), { code: 'ERR_DSP_ARGS' }, why);
  }
});
