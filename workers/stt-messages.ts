// Task and answer shapes of the speech threads (workers/stt-local.ts, workers/vad.ts), shared with engine/stt/.
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

/** Creates the session's decoder in the thread. */
export interface LocalOpenTask {
  type: 'open';
  sessionId: string;
  /** Directory holding `en-us/`, `en-us.lm.bin` and `cmudict-en-us.dict`. */
  modelDir: string;
  /** An utterance longer than this is cut (pocketsphinx decodes whole utterances), in samples at 16 kHz. */
  maxUtteranceSamples: number;
}

/** A batch of the session's PCM, in order; the buffers are moved. */
export interface LocalAudioTask {
  type: 'audio';
  sessionId: string;
  pcm: Int16Array[];
}

/** Ends the current utterance and answers with its words. */
export interface LocalFlushTask {
  type: 'flush';
  sessionId: string;
}

/** Frees the session's decoder. */
export interface LocalCloseTask {
  type: 'close';
  sessionId: string;
}

export type LocalTask = LocalOpenTask | LocalAudioTask | LocalFlushTask | LocalCloseTask;

export interface LocalAnswerOk {
  ok: true;
  segments: LocalSegment[];
}

/** Errors cross threads as data; engine/stt/local/recognizer.ts turns them into an SttFailure or an EngineError. */
export interface FailAnswer {
  ok: false;
  code: 'ENG_ERR_STT_LOCAL_FAILED' | 'ENG_ERR_STT_VAD_FAILED';
  message: string;
}

export type LocalAnswer = LocalAnswerOk | FailAnswer;

/**
 * Speech probabilities for whole 512-sample windows of `pcm`. Stateless: the Silero state (h, c) travels with the
 * task and comes back updated, so any VAD thread can serve any session.
 */
export interface VadTask {
  pcm: Int16Array;
  h: Float32Array;
  c: Float32Array;
  /** Model file; the thread loads it once. */
  modelPath: string;
}

export interface VadAnswerOk {
  ok: true;
  /** One probability per 512-sample window. */
  probs: Float32Array;
  h: Float32Array;
  c: Float32Array;
}

export type VadAnswer = VadAnswerOk | FailAnswer;
