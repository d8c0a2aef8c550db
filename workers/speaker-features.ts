// Short-time spectral features of 16 kHz mono speech: log-mel filterbank energies, the MFCCs derived from them, and
// the mean-normalised 80-band fbank that ONNX speaker models (WeSpeaker) take. Pure TypeScript, so the built-in
// speaker embedding needs no native code and no model file, and runs on the embedding thread.

export const SAMPLE_RATE = 16_000;
/** 25 ms frames every 10 ms, the usual framing of speaker and speech models. */
export const FRAME_LENGTH = 400;
export const FRAME_SHIFT = 160;
export const FFT_SIZE = 512;
export const MEL_BANDS = 40;
export const MEL_LOW_HZ = 20;
export const MEL_HIGH_HZ = 7_600;
export const PRE_EMPHASIS = 0.97;

const melOf = (hz: number): number => 1127 * Math.log(1 + hz / 700);
const hzOf = (mel: number): number => 700 * (Math.exp(mel / 1127) - 1);

/** Centre frequency (Hz) of each mel band, low to high. */
export function melCentres(bands = MEL_BANDS, highHz = MEL_HIGH_HZ): Float64Array {
  const low = melOf(MEL_LOW_HZ);
  const step = (melOf(highHz) - low) / (bands + 1);
  const out = new Float64Array(bands);
  for (let b = 0; b < bands; b++) out[b] = hzOf(low + (b + 1) * step);
  return out;
}

interface Filter { start: number; weights: Float64Array }

function melFilters(bands: number, highHz: number): Filter[] {
  const low = melOf(MEL_LOW_HZ);
  const step = (melOf(highHz) - low) / (bands + 1);
  const binHz = SAMPLE_RATE / FFT_SIZE;
  const filters: Filter[] = [];
  for (let b = 0; b < bands; b++) {
    const left = low + b * step;
    const centre = left + step;
    const right = centre + step;
    const start = Math.ceil(hzOf(left) / binHz);
    const end = Math.floor(hzOf(right) / binHz);
    const weights = new Float64Array(Math.max(0, end - start + 1));
    for (let k = start; k <= end; k++) {
      const mel = melOf(k * binHz);
      weights[k - start] = Math.max(0, mel <= centre ? (mel - left) / step : (right - mel) / step);
    }
    filters.push({ start, weights });
  }
  return filters;
}

/** In-place iterative radix-2 FFT of (re, im), length a power of two. */
export function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      let t = re[i]!; re[i] = re[j]!; re[j] = t;
      t = im[i]!; im[i] = im[j]!; im[j] = t;
    }
  }
  for (let size = 2; size <= n; size <<= 1) {
    const half = size >> 1;
    const angle = (-2 * Math.PI) / size;
    const wr = Math.cos(angle);
    const wi = Math.sin(angle);
    for (let start = 0; start < n; start += size) {
      let cr = 1;
      let ci = 0;
      for (let k = 0; k < half; k++) {
        const a = start + k;
        const b = a + half;
        const tr = re[b]! * cr - im[b]! * ci;
        const ti = re[b]! * ci + im[b]! * cr;
        re[b] = re[a]! - tr; im[b] = im[a]! - ti;
        re[a] = re[a]! + tr; im[a] = im[a]! + ti;
        const next = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = next;
      }
    }
  }
}

/** Log-mel energies per frame, with each frame's log energy (for choosing speech frames). */
export interface LogMel { frames: number; bands: number; values: Float64Array; energy: Float64Array }

export class FeatureExtractor {
  readonly bands: number;
  private readonly filters: Filter[];
  private readonly window = new Float64Array(FRAME_LENGTH);
  private readonly re = new Float64Array(FFT_SIZE);
  private readonly im = new Float64Array(FFT_SIZE);
  private readonly power = new Float64Array(FFT_SIZE / 2 + 1);

  /** @param highHz upper edge of the top band (the Nyquist frequency for a Kaldi-style fbank). */
  constructor(bands = MEL_BANDS, highHz = MEL_HIGH_HZ) {
    this.bands = bands;
    this.filters = melFilters(bands, highHz);
    for (let i = 0; i < FRAME_LENGTH; i++) this.window[i] = 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (FRAME_LENGTH - 1));
  }

  logMel(pcm: Float32Array): LogMel {
    const frames = pcm.length < FRAME_LENGTH ? 0 : 1 + Math.floor((pcm.length - FRAME_LENGTH) / FRAME_SHIFT);
    const values = new Float64Array(frames * this.bands);
    const energy = new Float64Array(frames);
    const { re, im, power, window } = this;
    for (let f = 0; f < frames; f++) {
      const offset = f * FRAME_SHIFT;
      let mean = 0;
      for (let i = 0; i < FRAME_LENGTH; i++) mean += pcm[offset + i]!;
      mean /= FRAME_LENGTH;
      let previous = pcm[offset]! - mean;
      let sum = 0;
      for (let i = 0; i < FRAME_LENGTH; i++) {
        const sample = pcm[offset + i]! - mean;
        re[i] = (sample - PRE_EMPHASIS * previous) * window[i]!;
        previous = sample;
        sum += sample * sample;
      }
      re.fill(0, FRAME_LENGTH);
      im.fill(0);
      energy[f] = Math.log(sum + 1e-10);
      fft(re, im);
      for (let k = 0; k < power.length; k++) power[k] = re[k]! * re[k]! + im[k]! * im[k]!;
      for (let b = 0; b < this.bands; b++) {
        const { start, weights } = this.filters[b]!;
        let acc = 0;
        for (let k = 0; k < weights.length; k++) acc += weights[k]! * power[start + k]!;
        values[f * this.bands + b] = Math.log(acc + 1e-10);
      }
    }
    return { frames, bands: this.bands, values, energy };
  }
}

/** DCT-II matrix (orthonormal) turning `bands` log-mel energies into `count` cepstral coefficients. */
export function dctMatrix(count: number, bands: number): Float64Array {
  const out = new Float64Array(count * bands);
  for (let c = 0; c < count; c++) {
    const scale = Math.sqrt((c === 0 ? 1 : 2) / bands);
    for (let b = 0; b < bands; b++) out[c * bands + b] = scale * Math.cos((Math.PI * c * (b + 0.5)) / bands);
  }
  return out;
}

/** Int16 samples as floats in [-1, 1); Float32 input is returned as it is. */
export function toFloat(pcm: Int16Array | Float32Array): Float32Array {
  if (pcm instanceof Float32Array) return pcm;
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i]! / 32768;
  return out;
}

/** Bands of the fbank ONNX speaker models take (WeSpeaker, and Kaldi recipes generally). */
export const FBANK_BANDS = 80;

/**
 * The input of an ONNX speaker model: 80 log-mel bands up to 8 kHz over 25 ms Hamming frames every 10 ms, from
 * samples at Int16 scale (as Kaldi reads a WAV file), with each band's mean over the utterance subtracted (cepstral
 * mean normalisation). Row-major [frames, 80] as Float32, ready for a [1, frames, 80] tensor.
 */
export function fbank(extractor: FeatureExtractor, pcm: Int16Array): { frames: number; values: Float32Array } {
  const scaled = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) scaled[i] = pcm[i]!;
  const mel = extractor.logMel(scaled);
  const { frames, bands } = mel;
  const values = new Float32Array(frames * bands);
  for (let b = 0; b < bands; b++) {
    let sum = 0;
    for (let f = 0; f < frames; f++) sum += mel.values[f * bands + b]!;
    const mean = frames === 0 ? 0 : sum / frames;
    for (let f = 0; f < frames; f++) values[f * bands + b] = mel.values[f * bands + b]! - mean;
  }
  return { frames, values };
}
