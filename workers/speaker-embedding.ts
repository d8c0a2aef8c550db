// Speaker embeddings: a voice as a fixed-length unit vector, compared by cosine similarity. The built-in embedding
// works offline with no model file: statistics of MFCCs over the speech frames of an utterance.
import { FRAME_LENGTH, FeatureExtractor, SAMPLE_RATE, dctMatrix, toFloat } from './speaker-features.js';

/** Turns 16 kHz mono PCM into a unit-length vector; utterances of one voice land close together. */
export interface SpeakerEmbedder {
  readonly name: string;
  readonly dimension: number;
  embed(pcm: Int16Array | Float32Array): Float32Array;
}

export const EMBEDDING_SAMPLE_RATE = SAMPLE_RATE;
/** The built-in embedding's name, stored with its vectors. */
export const DSP_MODEL_NAME = 'dsp-mfcc-stats';
/** Cepstral coefficients pooled (c1 onwards: c0 is loudness, which says nothing of the voice). */
export const MFCC_COUNT = 20;
/** Frames quieter than the loudest by more than this (natural log of energy, ≈ 30 dB) are not speech. */
export const SPEECH_FRAME_RANGE = 7;
/** Sinusoidal lifter length: raises the higher cepstra, which carry the vocal tract's detail, towards c1's scale. */
export const LIFTER = 40;
/** Weights of the three groups (MFCC means, standard deviations, delta standard deviations) in the vector. */
export const GROUP_WEIGHTS = [1, 0.5, 0.5] as const;
/** A frame whose RMS is under this (-80 dBFS) is silence however loud the rest is; all-silent audio embeds to zeros. */
export const SILENCE_RMS = 1e-4;
/** Frames either side for the delta coefficients. */
export const DELTA_SPAN = 2;
/** Width of the built-in embedding: means, deviations and delta deviations of c1..c19. */
export const DSP_DIMENSION = 3 * (MFCC_COUNT - 1);

/** Cosine of the angle between two vectors (1 for the same direction); 0 when either is all zeros. */
export function cosineSimilarity(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new RangeError('vectors differ in length');
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Scales a vector to unit length in place (an all-zero vector stays zero). */
export function normalise(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]! * v[i]!;
  if (sum > 0) {
    const scale = 1 / Math.sqrt(sum);
    for (let i = 0; i < v.length; i++) v[i] = v[i]! * scale;
  }
  return v;
}

/**
 * Means (liftered) and standard deviations of MFCCs c1..c19, and standard deviations of their deltas, over the loud
 * frames. Each group is centred across its coefficients, scaled to unit length and weighted before the whole vector
 * is normalised: the means carry most of what tells voices apart, and centring keeps unrelated voices away from 1.
 */
export class DspSpeakerEmbedder implements SpeakerEmbedder {
  readonly name = DSP_MODEL_NAME;
  readonly dimension = DSP_DIMENSION;
  private readonly extractor = new FeatureExtractor();
  private readonly dct = dctMatrix(MFCC_COUNT, this.extractor.bands);

  embed(pcm: Int16Array | Float32Array): Float32Array {
    const mel = this.extractor.logMel(toFloat(pcm));
    const { bands } = mel;
    const n = MFCC_COUNT - 1;
    const silenceFloor = Math.log(FRAME_LENGTH * SILENCE_RMS * SILENCE_RMS);
    let loudest = -Infinity;
    for (let f = 0; f < mel.frames; f++) loudest = Math.max(loudest, mel.energy[f]!);
    const cepstra: Float64Array[] = [];
    for (let f = 0; f < mel.frames; f++) {
      if (mel.energy[f]! < Math.max(loudest - SPEECH_FRAME_RANGE, silenceFloor)) continue;
      const c = new Float64Array(n);
      for (let k = 0; k < n; k++) {
        let acc = 0;
        const row = (k + 1) * bands;
        for (let b = 0; b < bands; b++) acc += this.dct[row + b]! * mel.values[f * bands + b]!;
        c[k] = acc;
      }
      cepstra.push(c);
    }
    const out = new Float32Array(this.dimension);
    const count = cepstra.length;
    if (count === 0) return out;
    const mean = new Float64Array(n);
    const square = new Float64Array(n);
    const deltaSquare = new Float64Array(n);
    let norm = 0;
    for (let d = 1; d <= DELTA_SPAN; d++) norm += 2 * d * d;
    for (let f = 0; f < count; f++) {
      const c = cepstra[f]!;
      for (let k = 0; k < n; k++) {
        mean[k] = mean[k]! + c[k]!;
        square[k] = square[k]! + c[k]! * c[k]!;
        let delta = 0;
        for (let d = 1; d <= DELTA_SPAN; d++) {
          delta += d * (cepstra[Math.min(count - 1, f + d)]![k]! - cepstra[Math.max(0, f - d)]![k]!);
        }
        delta /= norm;
        deltaSquare[k] = deltaSquare[k]! + delta * delta;
      }
    }
    for (let k = 0; k < n; k++) {
      const m = mean[k]! / count;
      out[k] = m * (1 + (LIFTER / 2) * Math.sin((Math.PI * (k + 1)) / LIFTER));
      out[n + k] = Math.log(Math.sqrt(Math.max(0, square[k]! / count - m * m)) + 1e-6);
      out[2 * n + k] = Math.log(Math.sqrt(deltaSquare[k]! / count) + 1e-6);
    }
    for (let g = 0; g < 3; g++) {
      const group = normalise(centre(out.subarray(g * n, (g + 1) * n)));
      for (let k = 0; k < n; k++) group[k] = group[k]! * GROUP_WEIGHTS[g]!;
    }
    return normalise(out);
  }
}

function centre(v: Float32Array): Float32Array {
  let sum = 0;
  for (let i = 0; i < v.length; i++) sum += v[i]!;
  const mean = sum / v.length;
  for (let i = 0; i < v.length; i++) v[i] = v[i]! - mean;
  return v;
}
