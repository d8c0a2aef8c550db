// Uploaded audio decoded off the main thread: a 15-minute voice message or an hour of offline sync takes the CPU for
// a second or more, which on the main thread would hold every live session's frames for as long. One thread, started
// by the first file, so a node that never gets one pays nothing; files wait their turn on it.
import { TaskThread, type TaskRunner } from '../runtime/task-thread.js';
import { AudioInputError } from './audio.js';
import type { FileDecodeAnswer, FileDecodeTask } from './file-decode-thread.js';
import type { VoiceQuery } from './upload.js';

const HANDLER = new URL('./file-decode-thread.js', import.meta.url).href;

export interface DecodedUpload {
  pcm: Int16Array;
  language: string | undefined;
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
   * A voice-message request body as readVoiceUpload reads it. Throws AudioInputError with the rule the body broke;
   * any other error (the thread died, the decoder is closed) is the service's, not the file's.
   */
  async voice(contentType: string | undefined, query: VoiceQuery, body: Uint8Array | undefined, nowMs: number): Promise<DecodedUpload> {
    return this.#run({ kind: 'voice', contentType, query, body, nowMs });
  }

  /** One offline sync file's audio (parseSyncFile(...).decode()); throws as voice() does. */
  async sync(bytes: Uint8Array, filename: string, nowMs: number): Promise<Int16Array> {
    return (await this.#run({ kind: 'sync', bytes, filename, nowMs })).pcm;
  }

  async #run(task: FileDecodeTask): Promise<DecodedUpload> {
    if (this.#closed) throw new Error('the file decoder is closed');
    this.#thread ??= this.#start();
    const answer = await this.#thread.run(task);
    if (!answer.ok) throw new AudioInputError(answer.reason);
    return { pcm: answer.pcm, language: answer.language };
  }

  async close(): Promise<void> {
    this.#closed = true;
    const thread = this.#thread;
    this.#thread = undefined;
    await thread?.destroy();
  }
}
