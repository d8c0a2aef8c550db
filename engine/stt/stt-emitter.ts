// Typed event plumbing shared by the SttStream implementations (segments, failure).
import { EventEmitter } from 'node:events';
import type { SttFailure, SttSegment, SttStreamEvents } from './types.js';

/** Base for SttStream classes: `on`/`off` typed by SttStreamEvents, `emitSegments`/`emitFailure` for subclasses. */
export abstract class SttEmitter {
  readonly #events = new EventEmitter();

  on<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this {
    this.#events.on(event, listener);
    return this;
  }

  off<E extends keyof SttStreamEvents>(event: E, listener: SttStreamEvents[E]): this {
    this.#events.off(event, listener);
    return this;
  }

  protected emitSegments(segments: SttSegment[]): void {
    if (segments.length > 0) this.#events.emit('segments', segments);
  }

  protected emitFailure(failure: SttFailure): void {
    this.#events.emit('failure', failure);
  }
}
