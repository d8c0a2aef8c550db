// A fixed-memory latency histogram (0.1 ms steps below 100 ms, 1 ms steps to 60 s) for fakes that see millions of samples.

const FINE_MS = 100;
const FINE_STEPS = FINE_MS * 10;
const COARSE_MAX_MS = 60_000;

export interface LagSummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export class LagHistogram {
  readonly #buckets = new Uint32Array(FINE_STEPS + (COARSE_MAX_MS - FINE_MS) + 1);
  #count = 0;
  #max = 0;

  add(ms: number): void {
    const v = ms > 0 ? ms : 0;
    const i = v < FINE_MS ? Math.floor(v * 10) : Math.min(FINE_STEPS + Math.floor(v - FINE_MS), this.#buckets.length - 1);
    this.#buckets[i]!++;
    this.#count++;
    if (v > this.#max) this.#max = v;
  }

  reset(): void {
    this.#buckets.fill(0);
    this.#count = 0;
    this.#max = 0;
  }

  /** Percentiles are bucket upper bounds (within 0.1 ms below 100 ms, 1 ms above), rounded to 0.1 ms. */
  summary(): LagSummary {
    return { count: this.#count, p50: this.#at(0.5), p95: this.#at(0.95), p99: this.#at(0.99), max: Math.round(this.#max * 10) / 10 };
  }

  #at(q: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.ceil(q * this.#count);
    let seen = 0;
    for (let i = 0; i < this.#buckets.length; i++) {
      seen += this.#buckets[i]!;
      if (seen >= rank) {
        const upper = i < FINE_STEPS ? (i + 1) / 10 : FINE_MS + (i - FINE_STEPS) + 1;
        return Math.round(Math.min(upper, this.#max) * 10) / 10;
      }
    }
    return Math.round(this.#max * 10) / 10;
  }
}
