// Comparing speaker embeddings in engine code: cosine similarity and the match rule's thresholds per model.
import { DSP_MODEL_NAME, cosineSimilarity, normalise } from '../../workers/speaker-embedding.js';

export { cosineSimilarity, normalise };

/** When two voices are taken for one: the best similarity must reach `similarity` and beat the runner-up by `margin`. */
export interface MatchThresholds {
  similarity: number;
  margin: number;
}

/**
 * The built-in embedding's rule, measured against prints made of three clips (docs/speakers.md): strangers' clips
 * scored at most 0.945 against them and their owners' at least 0.95, so 0.95 rather than the 0.935 where single clips
 * cross over (a voice taken for the user's is what users notice most); a 0.02 margin over the runner-up gave up one
 * clip in 25 and no wrong names.
 */
export const BUILTIN_MATCH: Readonly<MatchThresholds> = Object.freeze({ similarity: 0.95, margin: 0.02 });

/**
 * A model file's rule, as the compatible system applies it to WeSpeaker ResNet34 vectors: cosine distance under
 * 0.65 (similarity over 0.35) with a 0.10 margin over the runner-up. Neural embeddings spread unrelated voices
 * near 0, so their scale differs from the built-in one's.
 */
export const MODEL_MATCH: Readonly<MatchThresholds> = Object.freeze({ similarity: 0.35, margin: 0.1 });

/** The thresholds for vectors of `model` (the name an EmbeddingService stores with them). */
export function matchThresholds(model: string): Readonly<MatchThresholds> {
  return model === DSP_MODEL_NAME ? BUILTIN_MATCH : MODEL_MATCH;
}

/** The normalised mean of unit vectors: a voice's print from several clips (all zeros when there are none). */
export function meanEmbedding(vectors: readonly Float32Array[], dimension: number): Float32Array {
  const out = new Float32Array(dimension);
  for (const v of vectors) {
    if (v.length !== dimension) continue;
    for (let i = 0; i < dimension; i++) out[i] = out[i]! + v[i]!;
  }
  return normalise(out);
}
