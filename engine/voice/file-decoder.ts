// Uploaded audio decoded off the main thread: a 15-minute voice message or an hour of offline sync takes the CPU for
// a second or more, which on the main thread would hold every live session's frames for as long. One thread, started
// by the first file, so a node that never gets one pays nothing; files wait their turn on it.
import { TaskThread, type TaskRunner } from '../runtime/task-thread.js';
import { AudioInputError } from './audio.js';
import type { SyncProbe } from '../sync/files.js';
import { verdictOf, type SpeechCheckParams, type SpeechVerdict } from './speech-check.js';
import type { FileDecodeAnswer, FileDecodeTask } from './file-decode-thread.js';
import type { VoiceQuery } from './upload.js';

const HANDLER = new URL('./file-decode-thread.js', import.meta.url).href;

export interface DecodedUpload {
  pcm: Int16Array;
  language: string | undefined;
  /** The speech gate's verdict, when voice() was asked for it. */
  speech?: SpeechVerdict;
}

/**
 * A copy of `bytes` in a buffer of its own, moved to the thread rather than cloned: a structured clone of a large
 * typed array costs the main thread far more than one copy, clones all of a larger buffer a view sits in (a form's
 * part), and the caller's bytes stay the caller's.
 */
function crossing(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  // The constructor copies; a Buffer's slice() would not.
  return new Uint8Array(bytes);
}

/** `bytes` as they are when they fill a buffer of their own the caller gives up (a file just read), else a copy. */
function given(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const whole = bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole ? new Uint8Array(bytes.buffer as ArrayBuffer) : crossing(bytes);
}

export class FileDecoder {
  readonly #start: () => TaskRunner<FileDecodeTask, FileDecodeAnswer>;
  #thread: TaskRunner<FileDecodeTask, FileDecodeAnswer> | undefined;
  #closed = false;

  /** @param start makes the runner (tests may give another). @defaultValue a TaskThread of file-decode-thread.js */
  constructor(start: () => TaskRunner<FileDecodeTask, FileDecodeAnswer> = () => new TaskThread<FileDecodeTask, FileDecodeAnswer>(HANDLER)) {
    this.#start = start;
  }

  /**
   * A voice-message request body as readVoiceUpload reads it, and with `gate` the speech check of what it decoded.
   * Throws AudioInputError with the rule the body broke; any other error (the thread died, the decoder is closed) is
   * the service's, not the file's.
   */
  async voice(contentType: string | undefined, query: VoiceQuery, body: Uint8Array | undefined, nowMs: number, gate?: SpeechCheckParams): Promise<DecodedUpload> {
    const own = body && crossing(body);
    return this.#run({ kind: 'voice', contentType, query, body: own, nowMs, ...(gate ? { gate } : {}) }, own ? [own.buffer] : []);
  }

  /**
   * One offline sync file's audio (parseSyncFile(...).decode()); throws as voice() does. The caller gives `bytes` up:
   * a file that fills its own buffer is moved as it is (it is left empty), saving a copy of up to 64 MiB.
   */
  async sync(bytes: Uint8Array, filename: string, nowMs: number): Promise<Int16Array> {
    const own = given(bytes);
    return (await this.#run({ kind: 'sync', bytes: own, filename, nowMs }, [own.buffer])).pcm;
  }

  /** A sync file's start, length and SHA-256, as its batch is checked; throws as voice() does. */
  async probe(bytes: Uint8Array, filename: string, nowMs: number): Promise<SyncProbe> {
    const own = crossing(bytes);
    const answer = await this.#answer({ kind: 'probe', bytes: own, filename, nowMs }, [own.buffer]);
    if (!('probe' in answer)) throw new Error('the file decoder answered out of turn');
    return answer.probe;
  }

  async #run(task: FileDecodeTask, moved: ArrayBuffer[]): Promise<DecodedUpload> {
    const answer = await this.#answer(task, moved);
    if (!('pcm' in answer)) throw new Error('the file decoder answered out of turn');
    return { pcm: answer.pcm, language: answer.language, ...(answer.gate ? { speech: verdictOf(answer.gate) } : {}) };
  }

  async #answer(task: FileDecodeTask, moved: ArrayBuffer[]): Promise<Exclude<FileDecodeAnswer, { ok: false }>> {
    if (this.#closed) throw new Error('the file decoder is closed');
    this.#thread ??= this.#start();
    const answer = await this.#thread.run(task, moved);
    if (!answer.ok) throw new AudioInputError(answer.reason);
    return answer;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.destroy();
  }
}
