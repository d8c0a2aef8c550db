// Task and answer shapes of the local engine's speech threads (workers/speech.ts), shared with engine/stt/local/speech.ts.

/** A word with times in seconds from the start of the stream's audio. */
export interface TimedWord {
  word: string;
  start: number;
  end: number;
}

/** One recognised utterance; the engine adds the speaker label. */
export interface LocalSegment {
  text: string;
  start: number;
  end: number;
  words: TimedWord[];
}

/** How the speech gate (workers/speech-gate.ts) decides; the defaults are those of SpeechGate. */
export interface GateSettings {
  /** Probability from which a window is speech. @defaultValue 0.5 */
  threshold?: number;
  /** Probability under which a window counts towards the hang-over (hysteresis). @defaultValue threshold - 0.15 */
  negativeThreshold?: number;
  /** Audio kept before speech starts and sent with it, in milliseconds. @defaultValue 300 */
  preRollMs?: number;
  /** Non-speech that ends a speech region, in milliseconds. @defaultValue 700 */
  hangoverMs?: number;
}

/** The gate of one session: the Silero model the thread loads (once per thread) and how the gate decides. */
export interface GateSpec extends GateSettings {
  modelPath: string;
}

/** Creates the session's recogniser in the thread, behind the speech gate when `gate` is given. */
export interface SpeechOpenTask {
  type: 'open';
  sessionId: string;
  /** Directory holding `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict`. */
  modelDir: string;
  /** An utterance longer than this is cut (pocketsphinx decodes whole utterances), in samples at 16 kHz. */
  maxUtteranceSamples: number;
  gate: GateSpec | null;
}

/** A batch of the session's PCM, in order; its buffer is moved. */
export interface SpeechAudioTask {
  type: 'audio';
  sessionId: string;
  pcm: Int16Array;
}

/** Gates what the thread still holds of the session's audio, ends the current utterance and answers with its words. */
export interface SpeechFlushTask {
  type: 'flush';
  sessionId: string;
}

/** Frees the session's recogniser. */
export interface SpeechCloseTask {
  type: 'close';
  sessionId: string;
}

export type SpeechTask = SpeechOpenTask | SpeechAudioTask | SpeechFlushTask | SpeechCloseTask;

/** A gated session's counters since it opened. */
export interface GateStats {
  /** Samples that reached the gate. */
  inSamples: number;
  /** Samples passed on to the recogniser. */
  passedSamples: number;
  /** Speech regions that ended (each ended the recogniser's utterance). */
  regions: number;
  /** Batches the VAD failed on; their audio was passed on ungated (the gate fails open). */
  vadFailures: number;
}

export interface SpeechAnswerOk {
  ok: true;
  /** Utterances the task closed, times in the stream's own seconds. */
  segments: LocalSegment[];
  /** The gate's counters, for a gated session. */
  gate?: GateStats;
}

/** Errors cross threads as data; engine/stt/local/speech.ts turns them into an SttFailure or an EngineError. */
export interface FailAnswer {
  ok: false;
  code: 'ENG_ERR_STT_LOCAL_FAILED';
  message: string;
}

export type SpeechAnswer = SpeechAnswerOk | FailAnswer;
