// Band-limited, stateful resampler of Int16 PCM to a fixed output rate (polyphase windowed-sinc, Kaiser window):
// picking the nearest sample instead would fold everything above 8 kHz back into the speech band.
import { loadAddon } from '../native/addon.js';

interface DspModule {
  /** Writes outputs into `out` from 0 while the filter's reach stays inside `hist[0, avail)`; moves state [pos, phase]. */
  resampleRun(coeffs: Float32Array, taps: number, up: number, down: number, hist: Float32Array, avail: number, state: Int32Array, out: Int16Array): number;
}
const dsp = loadAddon<DspModule>('dsp', 'DSP');

/** Zero crossings of the sinc on each side, counted at the lower of the two rates. */
const HALF_ZEROS = 16;
/** Kaiser β: about 80 dB stopband. */
const KAISER_BETA = 8;
/** Cut-off as a fraction of the lower Nyquist frequency: the transition band sits just below it. */
const CUTOFF = 0.9;

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** Zeroth-order modified Bessel function of the first kind (series), for the Kaiser window. */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  for (let k = 1; k < 50; k++) {
    term *= (x / (2 * k)) ** 2;
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

interface FilterBank {
  /** Output/input ratio reduced to L/M. */
  up: number;
  down: number;
  /** Taps per phase (2·half). */
  taps: number;
  /** Input samples of history needed on each side. */
  half: number;
  /** `up` phases × `taps` coefficients, phase-major. */
  coeffs: Float32Array;
}

const banks = new Map<string, FilterBank>();

function filterBank(inRate: number, outRate: number): FilterBank {
  const key = `${inRate}:${outRate}`;
  const cached = banks.get(key);
  if (cached !== undefined) return cached;
  const g = gcd(inRate, outRate);
  const up = outRate / g;
  const down = inRate / g;
  const scale = Math.min(1, outRate / inRate);
  // Cut-off in cycles per input sample.
  const fc = 0.5 * scale * CUTOFF;
  const half = Math.ceil(HALF_ZEROS / scale);
  const taps = 2 * half;
  const coeffs = new Float32Array(up * taps);
  const i0Beta = besselI0(KAISER_BETA);
  for (let p = 0; p < up; p++) {
    const frac = p / up;
    let sum = 0;
    const row = new Float64Array(taps);
    // Tap k multiplies input sample (i - half + 1 + k) for an output at input position i + frac.
    for (let k = 0; k < taps; k++) {
      const d = frac + half - 1 - k;
      const x = 2 * fc * d;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      const r = d / half;
      const w = Math.abs(r) >= 1 ? 0 : besselI0(KAISER_BETA * Math.sqrt(1 - r * r)) / i0Beta;
      row[k] = sinc * w;
      sum += row[k]!;
    }
    // Unit DC gain in every phase: no amplitude ripple at the phase rate.
    for (let k = 0; k < taps; k++) coeffs[p * taps + k] = row[k]! / sum;
  }
  const bank = { up, down, taps, half, coeffs };
  banks.set(key, bank);
  return bank;
}

/**
 * Resamples one stream of Int16 PCM from `inRate` to `outRate`; keep one per channel per session. The filter costs
 * 2·HALF_ZEROS/scale multiply-adds per output sample and keeps its history between calls, so chunked output equals
 * one-pass output sample for sample; the multiply-adds run in native code (native/dsp.cc, vectorised), which in
 * JavaScript would cost more than decoding the audio.
 */
export class Resampler {
  readonly inRate: number;
  readonly outRate: number;
  readonly #bank: FilterBank | null;
  /** Input not yet consumed, as floats; `#hist[0]` is input sample `#base`. */
  #hist: Float32Array;
  #histLen: number;
  /** Input index and phase of the next output sample ([pos, phase]), pos relative to `#hist`; native code moves them. */
  readonly #state = new Int32Array(2);

  /**
   * @param inRate input sample rate in Hz
   * @param outRate output sample rate in Hz (default 16000)
   */
  constructor(inRate: number, outRate = 16000) {
    if (!Number.isInteger(inRate) || !Number.isInteger(outRate) || inRate <= 0 || outRate <= 0) {
      throw new RangeError('sample rates must be positive integers');
    }
    this.inRate = inRate;
    this.outRate = outRate;
    this.#bank = inRate === outRate ? null : filterBank(inRate, outRate);
    const half = this.#bank?.half ?? 0;
    this.#hist = new Float32Array(Math.max(1024, 4 * half));
    // Start with half-1 zeros of history so output 0 is centred on input 0 (no delay, zero-padded start).
    this.#histLen = Math.max(0, half - 1);
    this.#state[0] = this.#histLen;
  }

  /** Output samples the filter still owes for input already pushed (what `flush()` would produce, roughly). */
  get delaySamples(): number {
    return this.#bank === null ? 0 : Math.ceil((this.#bank.half * this.outRate) / this.inRate);
  }

  /** Resamples the next chunk; returns the output ready so far (the last ~1 ms waits for future input). At equal rates it returns `input` itself. */
  push(input: Int16Array): Int16Array {
    if (this.#bank === null) return input;
    this.#append(input);
    return this.#run();
  }

  /**
   * Resamples consecutive chunks in one run: one output array for all of them (at equal rates, the chunks themselves,
   * none copied).
   */
  pushAll(inputs: readonly Int16Array[]): Int16Array[] {
    if (this.#bank === null) return inputs.filter((c) => c.length > 0);
    for (const c of inputs) this.#append(c);
    const out = this.#run();
    return out.length > 0 ? [out] : [];
  }

  /** Ends the stream: pads with silence so the held-back tail comes out. */
  flush(): Int16Array {
    if (this.#bank === null) return new Int16Array(0);
    this.#append(new Int16Array(this.#bank.half));
    return this.#run();
  }

  #append(input: Int16Array): void {
    const need = this.#histLen + input.length;
    if (need > this.#hist.length) {
      const grown = new Float32Array(Math.max(need, this.#hist.length * 2));
      grown.set(this.#hist.subarray(0, this.#histLen));
      this.#hist = grown;
    }
    const h = this.#hist;
    let j = this.#histLen;
    for (let i = 0; i < input.length; i++) h[j++] = input[i]!;
    this.#histLen = need;
  }

  #run(): Int16Array {
    const { up, down, taps, half, coeffs } = this.#bank!;
    const avail = this.#histLen;
    // Output n reads input pos-half+1 … pos+half, so pos+half must be < avail.
    const state = this.#state;
    const maxOut = Math.max(0, Math.ceil(((avail - state[0]! - half + 1) * up) / down) + 1);
    const out = new Int16Array(maxOut);
    const n = dsp.resampleRun(coeffs, taps, up, down, this.#hist, avail, state, out);
    let pos = state[0]!;
    const h = this.#hist;
    // Drop input no future output needs; keep the history the filter still reaches back into.
    const keepFrom = Math.min(pos - half + 1, avail);
    if (keepFrom > 0) {
      h.copyWithin(0, keepFrom, avail);
      this.#histLen = avail - keepFrom;
      pos -= keepFrom;
    }
    state[0] = pos;
    // A view: the last slot or so of `out` is spare; a copy here was a second allocation on nearly every call.
    return n === out.length ? out : out.subarray(0, n);
  }
}
