// Whether this node's live audio waits too long on decoding for it to take more sessions: past its capacity every
// session's audio falls behind together, so new ones are refused (1013) and their devices reconnect to another node.
import type { Clock } from '../clock.js';

export interface DecodeOverloadOptions {
  /** Delay of a decode task, in seconds, at or over which it counts towards overload. 0: never overloaded. */
  thresholdS: number;
  clock: Clock;
  /**
   * Consecutive tasks over the threshold that make the node overloaded, and under half of it that end it.
   * @defaultValue 20
   */
  run?: number;
  /**
   * Milliseconds without a decode task (at least twice the last one's delay) after which the node is no longer
   * overloaded. @defaultValue 1000
   */
  staleMs?: number;
  /** Told when the node becomes overloaded (true) or no longer is (false), with the last task's delay in seconds. */
  onChange?: (overloaded: boolean, delayS: number) => void;
}

/**
 * Counts a run of slow decode tasks, not one (a collector pause or a stalled host delays the few in flight, not a run),
 * so it needs no timer: a node whose tasks stopped coming is not overloaded after `staleMs` of the injected clock.
 */
export class DecodeOverload {
  readonly #thresholdS: number;
  readonly #clock: Clock;
  readonly #run: number;
  readonly #staleMs: number;
  readonly #onChange: ((overloaded: boolean, delayS: number) => void) | undefined;
  #overloaded = false;
  /** Consecutive tasks pointing the other way: over the threshold while not overloaded, under half of it while so. */
  #streak = 0;
  #lastAt = -Infinity;
  #lastDelayMs = 0;

  constructor(o: DecodeOverloadOptions) {
    if (!(o.thresholdS >= 0)) throw new RangeError('thresholdS must be 0 or more');
    this.#thresholdS = o.thresholdS;
    this.#clock = o.clock;
    this.#run = Math.max(1, o.run ?? 20);
    this.#staleMs = o.staleMs ?? 1000;
    this.#onChange = o.onChange;
  }

  /** One decode task's delay, in seconds (CodecPoolOptions.onTaskDelay). */
  observe(delayS: number): void {
    if (this.#thresholdS === 0) return;
    this.#lastAt = this.#clock.now();
    this.#lastDelayMs = delayS * 1000;
    const against = this.#overloaded ? delayS < this.#thresholdS / 2 : delayS >= this.#thresholdS;
    this.#streak = against ? this.#streak + 1 : 0;
    if (this.#streak < this.#run) return;
    this.#streak = 0;
    this.#overloaded = !this.#overloaded;
    this.#onChange?.(this.#overloaded, delayS);
  }

  /**
   * True while new sessions should be refused. No task for `staleMs`, or for twice the last task's delay when that is
   * longer, ends it: deep in overload one task may take seconds (it holds every session's backlog), and the quiet
   * while it runs is not a node whose sessions left.
   */
  get overloaded(): boolean {
    if (this.#overloaded && this.#clock.now() - this.#lastAt >= Math.max(this.#staleMs, 2 * this.#lastDelayMs)) {
      this.#overloaded = false;
      this.#streak = 0;
      this.#onChange?.(false, 0);
    }
    return this.#overloaded;
  }
}
