// One async loop that works through a caller's queue a step at a time: the "drain behind a running flag" of the
// local engine's streams (engine/stt/local/speech.ts).
//
// Rationale: the queue stays with the caller because each shapes its work differently (the local engine coalesces
// consecutive audio into one task); what the loop gives is running at most one step at a time, never stranding work
// added as the loop ends, waiting for idle, and stopping.

export interface SerialLoopOptions {
  /** Whether there is work; asked synchronously before each step. */
  ready: () => boolean;
  /**
   * One unit of work; the next is asked for once it settles. Catch the failures you expect inside: a step that
   * throws ends the run, and its error rejects `idle()` for those waiting on that run.
   */
  step: () => Promise<void>;
}

export class SerialLoop {
  readonly #ready: () => boolean;
  readonly #step: () => Promise<void>;
  /** True while #run runs; set and cleared synchronously with the ready check, so work added as it ends is never stranded. */
  #running = false;
  #run: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(options: SerialLoopOptions) {
    this.#ready = options.ready;
    this.#step = options.step;
  }

  /** True once stop() was called: no step starts any more. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Starts the loop if there is work and it is not already running; call it after adding work. */
  kick(): void {
    if (this.#running || !this.#canStep()) return;
    this.#running = true;
    this.#run = this.#loop();
    // Handled here so a failed step never becomes an unhandled rejection (which ends a Node 20 process); idle() still rejects.
    this.#run.catch(() => undefined);
  }

  /** Resolves once no step is running (work that is not ready may still be queued). */
  async idle(): Promise<void> {
    while (this.#running) await this.#run;
  }

  /** Lets the running step finish and starts no other; resolves once it finished. Idempotent. */
  stop(): Promise<void> {
    this.#stopped = true;
    return this.idle();
  }

  #canStep(): boolean {
    return !this.#stopped && this.#ready();
  }

  async #loop(): Promise<void> {
    try {
      // The readiness check and the flag reset happen in one synchronous step (see #running).
      while (this.#canStep()) await this.#step();
    } finally {
      this.#running = false;
    }
  }
}
