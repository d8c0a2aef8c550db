// Typed loader for the PocketSphinx addon (native/pocketsphinx.cc over Debian's libpocketsphinx 5prealpha).
import path from 'node:path';
import { loadAddon } from './addon.js';

/** One recognised word; frames are 10 ms from the start of the utterance. */
export type PsWord = [word: string, startFrame: number, endFrame: number];

export interface PsUtterance {
  text: string;
  words: PsWord[];
}

interface NativePsDecoder {
  /** Feeds 16 kHz mono PCM; opens an utterance when none is open. Returns pocketsphinx's in-speech flag. */
  process(pcm: Int16Array): boolean;
  /** Closes the open utterance and returns its words (fillers removed), or null when none was open. */
  endUtterance(): PsUtterance | null;
  /** Frees the decoder and its model copy now; idempotent. Later calls throw. */
  free(): void;
}

interface NativePsModule {
  PsDecoder: new (hmmDir: string, lmPath: string, dictPath: string) => NativePsDecoder;
}

/** Where Debian's pocketsphinx-en-us puts the US English model. */
export const DEFAULT_PS_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';

/** 10 ms per frame at pocketsphinx's default -frate 100. */
export const PS_FRAME_SAMPLES = 160;

let ps: NativePsModule | undefined;

/**
 * Creates a decoder with the model in `modelDir` (acoustic model `en-us/`, `en-us.lm.bin`, `cmudict-en-us.dict`).
 * Each decoder loads its own copy of the model, synchronously (docs/patterns/local-stt.md says what it costs).
 */
export function createPsDecoder(modelDir: string = DEFAULT_PS_MODEL_DIR): NativePsDecoder {
  ps ??= loadAddon<NativePsModule>('pocketsphinx', 'pocketsphinx');
  return new ps.PsDecoder(path.join(modelDir, 'en-us'), path.join(modelDir, 'en-us.lm.bin'), path.join(modelDir, 'cmudict-en-us.dict'));
}

export type PsDecoder = NativePsDecoder;
