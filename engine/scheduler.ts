// The process-wide timer: one min-heap of due entries for every actor, walked by one unref'd interval (or tests' tick()),
// so thousands of sessions do not each hold Node timers, and time comes from the injected Clock tests move.
import type { Clock } from './clock.js';

export interface SchedulerOptions {
  clock: Clock;
  /**
   * How often the production interval walks due entries, in milliseconds; 0 disables it (tests call tick()).
   * @defaultValue 50
   */
  resolutionMs?: number;
  /** Called with an error thrown (or rejected) by an entry; entries never break the wheel. */
  onError?: (err: unknown) => void;
}

/** A handle for cancel(). */
export type TimerId = number;

interface Entry {
  id: TimerId;
  at: number;
  seq: number;
  fn: () => unknown;
  /** Repeat period in ms, 0 for a one-shot. */
  periodMs: number;
}

export class Scheduler {
  readonly #clock: Clock;
  readonly #onError: (err: unknown) => void;
  readonly #heap: Entry[] = [];
  /** Live entries by id; a cancelled entry stays in the heap until it surfaces and is skipped. */
  readonly #live = new Map<TimerId, Entry>();
  #nextId = 1;
  #seq = 0;
  #interval: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opts: SchedulerOptions) {
    this.#clock = opts.clock;
    this.#onError = opts.onError ?? (() => undefined);
    const resolutionMs = opts.resolutionMs ?? 50;
    if (resolutionMs > 0) {
      this.#interval = setInterval(() => void this.tick(), resolutionMs);
      this.#interval.unref();
    }
  }

  /** Entries waiting (for tests and metrics). */
  get size(): number {
    return this.#live.size;
  }

  /** Runs `fn` once at epoch-ms `at` (or at the first tick after it). */
  schedule(at: number, fn: () => unknown): TimerId {
    return this.#add(at, fn, 0);
  }

  /** Runs `fn` once after `delayMs` milliseconds of clock time. */
  after(delayMs: number, fn: () => unknown): TimerId {
    return this.#add(this.#clock.now() + delayMs, fn, 0);
  }

  /** Runs `fn` every `periodMs` milliseconds; a tick late by several periods runs it once, not once per period missed. */
  every(periodMs: number, fn: () => unknown): TimerId {
    if (!(periodMs > 0)) throw new RangeError('periodMs must be positive');
    return this.#add(this.#clock.now() + periodMs, fn, periodMs);
  }

  cancel(id: TimerId | undefined): void {
    if (id !== undefined) this.#live.delete(id);
  }

  /**
   * Runs every entry due at the clock's current time, earliest first, and resolves once the promises they
   * returned have settled (tests await it after `clock.advance()`).
   */
  async tick(): Promise<void> {
    const now = this.#clock.now();
    const pending: Promise<unknown>[] = [];
    for (;;) {
      const top = this.#heap[0];
      if (!top || top.at > now) break;
      this.#pop();
      if (this.#live.get(top.id) !== top) continue;
      if (top.periodMs > 0) {
        // Next due time strictly after now, on the entry's own grid. The entry itself goes back: a fresh object per
        // period would outlive the young generation (a session's 600 ms step) and die in the old one.
        const missed = Math.floor((now - top.at) / top.periodMs) + 1;
        top.at += missed * top.periodMs;
        top.seq = this.#seq++;
        this.#push(top);
      } else {
        this.#live.delete(top.id);
      }
      try {
        const r = top.fn();
        if (r instanceof Promise) pending.push(r.catch(this.#onError));
      } catch (err) {
        this.#onError(err);
      }
    }
    await Promise.all(pending);
  }

  /** Stops the interval and forgets every entry. */
  close(): void {
    this.#closed = true;
    clearInterval(this.#interval);
    this.#live.clear();
    this.#heap.length = 0;
  }

  #add(at: number, fn: () => unknown, periodMs: number): TimerId {
    if (this.#closed) throw new Error('scheduler is closed');
    const entry: Entry = { id: this.#nextId++, at, seq: this.#seq++, fn, periodMs };
    this.#live.set(entry.id, entry);
    this.#push(entry);
    return entry.id;
  }

  #less(a: Entry, b: Entry): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  #push(e: Entry): void {
    const h = this.#heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.#less(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.#less(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
}
