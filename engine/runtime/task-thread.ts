// One worker thread with a task/answer face, for the codec shards (engine/codec/pool.ts), the local engine's speech
// threads and the built-in processor's long transcripts: run() posts a task, the promise settles with the thread's
// answer; a thread that exits is replaced and the tasks it held are rejected.
//
// Rationale: each of these threads has one caller, which keeps its own queue, so a pool's queueing and balancing per
// task would be CPU spent for nothing; a bare worker thread and a map of pending tasks are all that is needed.
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { ThreadReply, ThreadRequest } from '../../workers/task-thread.js';
import type { LoopTimes } from './main-load.js';

const ENTRY = new URL('../../workers/task-thread.js', import.meta.url);

/** Semi-space of worker threads' young generation, MiB (setWorkerSemiSpace): 1 MiB semi-spaces, 2 MiB of new space. */
export const WORKER_SEMI_SPACE_MB = 1;

/**
 * Caps the young generation of every worker thread started from now on (codec shards, speech threads) at `mb` MiB per
 * semi-space; the main thread keeps its own, set on the command line when it started.
 *
 * Rationale: V8 grows a busy thread's semi-spaces up to `--max-semi-space-size`, which `npm start` sets for the main
 * thread, and a codec shard, whose tasks leave almost nothing alive, then commits new space it does not need. Worker
 * `resourceLimits.maxYoungGenerationSizeMb` cannot lower it: the command-line flag overrides it. V8 reads the flag
 * when it creates a thread's heap, so setting it after the main heap exists changes only the threads started later.
 */
export function setWorkerSemiSpace(mb: number = WORKER_SEMI_SPACE_MB): void {
  setFlagsFromString(`--max-semi-space-size=${mb}`);
}

/** What a codec shard needs of its runner: a thread (TaskThread) or the main thread itself (InlineRunner). */
export interface TaskRunner<Task, Answer> {
  run(task: Task, transferList?: ArrayBuffer[]): Promise<Answer>;
  destroy(): Promise<void>;
  /** The thread's event-loop times in ms (TaskThread); absent for the main thread's runner. */
  loopTimes?(): LoopTimes;
}

interface Pending {
  resolve: (answer: unknown) => void;
  reject: (error: Error) => void;
}

export class TaskThread<Task, Answer> implements TaskRunner<Task, Answer> {
  readonly #filename: string;
  readonly #onExit: (error: Error) => void;
  readonly #onEvent: (event: unknown) => void;
  #worker: Worker;
  /** Settles when the current thread has loaded its handler module, or has exited without. */
  #loaded!: Promise<void>;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #destroyed = false;
  readonly #posted = { tasks: 0, movedBytes: 0 };

  /**
   * @param filename URL or path of a module whose default export answers a task (value or promise).
   * @param onExit told when the thread exited on its own (a crash); a new thread is already starting.
   * @param onEvent told what the module sends between answers (its `events` export), in order with the answers.
   */
  constructor(filename: string, onExit: (error: Error) => void = () => undefined, onEvent: (event: unknown) => void = () => undefined) {
    this.#filename = filename;
    this.#onExit = onExit;
    this.#onEvent = onEvent;
    this.#worker = this.#spawn();
  }

  /**
   * Tasks posted to the thread since this runner was made, and the bytes of the buffers they moved there: what its
   * callers' data cost in crossings (a copied task's bytes are not counted).
   */
  get posted(): Readonly<{ tasks: number; movedBytes: number }> {
    return { ...this.#posted };
  }

  /**
   * Milliseconds the thread has spent running tasks and waiting for them since it started (its event loop's active
   * and idle time); a thread that replaced a crashed one starts again from zero.
   */
  loopTimes(): LoopTimes {
    const u = this.#worker.performance.eventLoopUtilization();
    return { active: u.active, idle: u.idle };
  }

  /** Posts a task, moving `transferList`; settles with the answer, or rejects if the thread dies with it. */
  run(task: Task, transferList: ArrayBuffer[] = []): Promise<Answer> {
    if (this.#destroyed) return Promise.reject(new Error('thread destroyed'));
    const id = this.#nextId++;
    return new Promise<Answer>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (a: unknown) => void, reject });
      let bytes = 0;
      for (const b of transferList) bytes += b.byteLength;
      try {
        this.#worker.postMessage({ id, task } satisfies ThreadRequest, transferList);
      } catch (err) {
        // Not cloneable, or a buffer to move is already detached: nothing reached the thread.
        this.#pending.delete(id);
        throw err;
      }
      this.#posted.tasks++;
      this.#posted.movedBytes += bytes;
    });
  }

  /**
   * Rejects what is pending and ends the thread, once it has loaded its handler module.
   *
   * Rationale: a thread terminated while it loads a native addon can abort the whole process. @discordjs/opus (the
   * codec shards load it) builds node-addon-api without C++ exceptions, so a N-API call refused in its init because
   * the thread is terminating ends in napi_fatal_error (SIGABRT) when a service closes right after it started.
   * Addons a handler loads later, inside a task, are its caller's to wait for: destroy() does not wait for tasks.
   */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#failAll(new Error('thread destroyed'));
    await this.#loaded;
    await this.#worker.terminate();
  }

  #spawn(): Worker {
    const worker = new Worker(ENTRY, { workerData: { filename: this.#filename } });
    let lastError: Error | undefined;
    let loaded!: () => void;
    this.#loaded = new Promise<void>((resolve) => (loaded = resolve));
    worker.on('message', (reply: ThreadReply) => {
      if ('loaded' in reply) {
        loaded();
        return;
      }
      if ('event' in reply) {
        this.#onEvent(reply.event);
        return;
      }
      const p = this.#pending.get(reply.id);
      if (p === undefined) return;
      this.#pending.delete(reply.id);
      if ('error' in reply) p.reject(new Error(reply.error));
      else p.resolve(reply.answer);
    });
    worker.on('error', (err) => (lastError = err));
    worker.on('exit', (code) => {
      loaded();
      if (this.#destroyed || worker !== this.#worker) return;
      const error = lastError ?? new Error(`worker thread exited with code ${code}`);
      this.#failAll(error);
      this.#worker = this.#spawn();
      this.#onExit(error);
    });
    return worker;
  }

  #failAll(error: Error): void {
    const pending = this.#pending;
    this.#pending = new Map();
    for (const p of pending.values()) p.reject(error);
  }
}

/**
 * The same task/answer face as TaskThread, answered on the calling thread: the handler module is imported here and,
 * once it is loaded, each task runs synchronously inside run(). Nothing is moved (the buffers stay this thread's) and
 * nothing crosses a thread, so a task costs its handler's work and nothing else.
 *
 * Imports are cached, so every InlineRunner of a module shares that module's state (the codec pool's stream keys
 * are unique in the process for this). A handler that ends its thread (process.exit) ends the process here.
 */
export class InlineRunner<Task, Answer> implements TaskRunner<Task, Answer> {
  #handle: ((task: Task) => Answer | Promise<Answer>) | undefined;
  /** Removes this runner's listener from the module's events. */
  #unlisten: (() => void) | undefined;
  /** Tasks that came before the module was loaded, run in order once it is. */
  #waiting: { task: Task; resolve: (answer: Answer | Promise<Answer>) => void; reject: (error: Error) => void }[] = [];
  /** Why the module did not load: every task fails with it. */
  #failed: Error | undefined;
  #destroyed = false;

  /** @param onEvent told what the module sends between answers (its `events` export; shared by every runner of it). */
  constructor(filename: string, onEvent?: (event: unknown) => void) {
    void import(filename).then(
      (m: { default: (task: Task) => Answer | Promise<Answer>; events?: (listener: (event: unknown) => void) => () => void }) => {
        this.#handle = m.default;
        if (onEvent && !this.#destroyed) this.#unlisten = m.events?.(onEvent);
        for (const w of this.#waiting.splice(0)) this.run(w.task).then(w.resolve, w.reject);
      },
      (err: unknown) => {
        this.#failed = err instanceof Error ? err : new Error(String(err));
        for (const w of this.#waiting.splice(0)) w.reject(this.#failed);
      },
    );
  }

  run(task: Task): Promise<Answer> {
    if (this.#destroyed) return Promise.reject(new Error('thread destroyed'));
    if (this.#failed) return Promise.reject(this.#failed);
    const handle = this.#handle;
    if (handle === undefined) return new Promise<Answer>((resolve, reject) => this.#waiting.push({ task, resolve, reject }));
    try {
      return Promise.resolve(handle(task));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  destroy(): Promise<void> {
    this.#destroyed = true;
    this.#unlisten?.();
    for (const w of this.#waiting.splice(0)) w.reject(new Error('thread destroyed'));
    return Promise.resolve();
  }
}
