// Latency histogram: 1% log buckets from 0.1 ms (exact below), mergeable across processes, percentiles on demand; a
// fixed bucket array, as keeping every value of tens of thousands of frames a second would cost memory and IPC.

const LINEAR_US = 100; // below 0.1 ms one bucket per microsecond
const STEP = Math.log(1.01);
const BUCKETS = LINEAR_US + Math.ceil(Math.log(600e6 / LINEAR_US) / STEP); // up to 10 minutes

/** @param {number} us */
function index(us) {
  if (us < LINEAR_US) return Math.max(0, Math.floor(us));
  return Math.min(BUCKETS - 1, LINEAR_US + Math.floor(Math.log(us / LINEAR_US) / STEP));
}

/** Upper bound of bucket `i`, in microseconds. */
function upper(/** @type {number} */ i) {
  return i < LINEAR_US ? i + 1 : LINEAR_US * Math.exp((i - LINEAR_US + 1) * STEP);
}

/** @typedef {{ count: number, sumMs: number, maxMs: number, buckets: [number, number][] }} HistogramJSON */

export class Histogram {
  counts = new Uint32Array(BUCKETS);
  count = 0;
  sumMs = 0;
  maxMs = 0;

  /** @param {number} ms a latency in milliseconds; negative counts as 0 */
  record(ms) {
    const v = ms > 0 ? ms : 0;
    const i = index(v * 1000);
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.count++;
    this.sumMs += v;
    if (v > this.maxMs) this.maxMs = v;
  }

  /** @param {Histogram | HistogramJSON} other */
  merge(other) {
    if (other instanceof Histogram) {
      for (let i = 0; i < BUCKETS; i++) this.counts[i] = (this.counts[i] ?? 0) + (other.counts[i] ?? 0);
    } else {
      for (const [i, n] of other.buckets) this.counts[i] = (this.counts[i] ?? 0) + n;
    }
    this.count += other.count;
    this.sumMs += other.sumMs;
    this.maxMs = Math.max(this.maxMs, other.maxMs);
    return this;
  }

  reset() {
    this.counts.fill(0);
    this.count = 0;
    this.sumMs = 0;
    this.maxMs = 0;
  }

  /**
   * The value at percentile `p` (0-100) in milliseconds (the bucket's upper bound, capped at the maximum); NaN when empty.
   * @param {number} p
   */
  percentile(p) {
    if (this.count === 0) return NaN;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i] ?? 0;
      if (seen >= rank) return Math.min(upper(i) / 1000, this.maxMs);
    }
    return this.maxMs;
  }

  /** p50, p95, p99 and max in milliseconds, rounded to 0.1 ms (null when empty). */
  summary() {
    const r = (/** @type {number} */ v) => (Number.isFinite(v) ? Math.round(v * 10) / 10 : null);
    return { count: this.count, p50: r(this.percentile(50)), p95: r(this.percentile(95)), p99: r(this.percentile(99)), max: r(this.count ? this.maxMs : NaN) };
  }

  /** @returns {HistogramJSON} sparse, for IPC and HTTP */
  toJSON() {
    /** @type {[number, number][]} */
    const buckets = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i]) buckets.push([i, /** @type {number} */ (this.counts[i])]);
    return { count: this.count, sumMs: this.sumMs, maxMs: this.maxMs, buckets };
  }

  /** @param {HistogramJSON} json */
  static from(json) {
    return new Histogram().merge(json);
  }
}
