// Which codec thread a new session's stream goes to: the first one not yet busy, so that a node at light load wakes
// one thread for all its sessions' audio, and the next thread takes sessions once the first has filled.
//
// Rationale: a codec thread's cost per session falls as it fills (one wake-up and one task carry more sessions'
// frames, one provider write more audio), so spreading a few hundred sessions evenly over every thread pays each
// thread's fixed costs twice for nothing. Past the fill mark, sessions go to the thread with the fewest, as before.

import { busyShare, type LoopTimes } from '../runtime/main-load.js';

/** Share of a core a codec thread may be busy before new sessions go to the next one. */
export const FILL_BUSY = 0.5;
/** What a session placed since the last measure is counted for: its audio has not shown in the thread's time yet. */
export const OPEN_BUSY = 0.001;
/** How often the threads' busy shares are measured, at most (on a session's open), in ms. */
export const FILL_WINDOW_MS = 1000;

/** A thread's event-loop times in ms (active: running tasks), or undefined while it has not started. */
export type LoopTimesReader = (shard: number) => LoopTimes | undefined;

interface Measure {
  active: number;
  idle: number;
  /** Busy share over the last window. */
  busy: number;
  /** Sessions placed during the window last measured, and since. */
  placedBefore: number;
  placedSince: number;
}

export class ShardFill {
  readonly #read: LoopTimesReader;
  readonly #now: () => number;
  readonly #fillBusy: number;
  readonly #measures: Measure[];
  #measuredAt = -Infinity;

  /** `fillBusy` 0 spreads every session over the threads by count. */
  constructor(shards: number, read: LoopTimesReader, o: { fillBusy?: number; now?: () => number } = {}) {
    this.#read = read;
    this.#now = o.now ?? (() => performance.now());
    this.#fillBusy = o.fillBusy ?? FILL_BUSY;
    this.#measures = Array.from({ length: shards }, () => ({ active: 0, idle: 0, busy: 0, placedBefore: 0, placedSince: 0 }));
  }

  /** The busy share each thread is counted at now: measured, plus the sessions placed since. */
  predicted(shard: number): number {
    const m = this.#measures[shard]!;
    return m.busy + (m.placedBefore + m.placedSince) * OPEN_BUSY;
  }

  /** Picks the shard for a new session, given each shard's open sessions, and counts it placed there. */
  pick(sizes: readonly number[]): number {
    this.#measure();
    let pick = -1;
    if (this.#fillBusy > 0) {
      for (let i = 0; i < sizes.length && pick < 0; i++) if (this.predicted(i) < this.#fillBusy) pick = i;
    }
    if (pick < 0) {
      pick = 0;
      for (let i = 1; i < sizes.length; i++) if (sizes[i]! < sizes[pick]!) pick = i;
    }
    this.#measures[pick]!.placedSince++;
    return pick;
  }

  #measure(): void {
    const now = this.#now();
    if (now - this.#measuredAt < FILL_WINDOW_MS) return;
    this.#measuredAt = now;
    this.#measures.forEach((m, i) => {
      const t = this.#read(i) ?? { active: 0, idle: 0 };
      m.busy = busyShare(m, t) ?? 0;
      m.active = t.active;
      m.idle = t.idle;
      m.placedBefore = m.placedSince;
      m.placedSince = 0;
    });
  }
}
