// Typed event plumbing shared by the SttStream implementations and the custom server client (segments, failure).
import { EventEmitter } from 'node:events';
import type { SttStreamEvents } from './types.js';

// EventEmitter stores listeners untyped; `on`/`off` are where the types are checked.
type Listener = (...args: any[]) => void;

/**
 * Base for SttStream classes: `on`/`off` typed by `Events` (SttStreamEvents, or a narrower segment type),
 * `emitSegments`/`emitFailure` for subclasses.
 */
export abstract class SttEmitter<Events extends SttStreamEvents = SttStreamEvents> {
  readonly #events = new EventEmitter();

  on<E extends keyof Events & string>(event: E, listener: Events[E]): this {
    this.#events.on(event, listener as Listener);
    return this;
  }

  off<E extends keyof Events & string>(event: E, listener: Events[E]): this {
    this.#events.off(event, listener as Listener);
    return this;
  }

  protected emitSegments(segments: Parameters<Events['segments']>[0]): void {
    if (segments.length > 0) this.#events.emit('segments', segments);
  }

  protected emitFailure(failure: Parameters<Events['failure']>[0]): void {
    this.#events.emit('failure', failure);
  }
}
