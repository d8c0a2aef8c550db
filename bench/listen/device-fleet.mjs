// The parent side of the device generator: forks generator processes (devices.mjs), gives each a block of device slots
// (the first fill first: slotShare), commands them, and sums their once-a-second reports into fleet totals.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Histogram } from '../lib/histogram.mjs';
import { track } from '../lib/processes.mjs';

const DEVICES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'devices.mjs');

/** Counters every generator reports (cumulative per generator). */
const SUMMED = ['opened', 'streams', 'closed', 'frames', 'bytes', 'audioMs', 'keepAlives', 'suggested', 'segments', 'sttFailed', 'pauses', 'connecting', 'open', 'ready', 'streaming', 'paused', 'backlogBytes', 'cpuS'];

/**
 * @typedef {object} FleetOptions
 * @property {string} host
 * @property {number} port
 * @property {string} query the /v4/listen query after uid (codec, sample_rate, custom_stt, …)
 * @property {string} fixtureFile
 * @property {{ uid: string, token: string }[]} devices
 * @property {number} [generators] generator processes (default: defaultGenerators())
 * @property {number} [keepAliveMs] default 10 s
 * @property {number} [burst] default 1
 * @property {number} [pauseEveryS] default 0 (no pauses)
 * @property {number} [pauseS] default 5
 * @property {boolean} [suggest] default false
 * @property {boolean} [ack] the query has ack=enabled: devices time the audio_acks (default false)
 * @property {number} [handshakes] upgrades in flight per generator (default 16)
 */

/**
 * @typedef {object} FleetTotals the generators' counters, summed (cumulative, except the current states)
 * @property {number} opened upgrades answered 101
 * @property {number} streams sessions that started streaming
 * @property {number} closed sessions that were ready and are gone
 * @property {number} frames
 * @property {number} bytes
 * @property {number} audioMs audio sent, in ms
 * @property {number} keepAlives
 * @property {number} suggested suggested_transcript messages sent
 * @property {number} segments segments received
 * @property {number} sttFailed
 * @property {number} pauses
 * @property {number} connecting devices now connecting (or queued to)
 * @property {number} open devices now upgraded, not ready yet
 * @property {number} ready devices now ready, not streaming
 * @property {number} streaming devices now streaming
 * @property {number} paused streaming devices now in a pause
 * @property {number} backlogBytes bytes written by the devices and not yet taken by the kernel
 * @property {number} backlogMaxMs the largest backlog of one device, in ms of its audio (the most of any generator)
 * @property {number} cpuS the generators' own CPU seconds
 * @property {Record<string, number>} refused sessions refused: upgrades by HTTP status (0: no answer), and `1013`
 *   for a close with 1013 before the session was ready (busy or full)
 * @property {Record<string, number>} unexpected sessions closed by the server (or the network), by close code and the device's state then (`1006 open`: before ready)
 */

/**
 * Devices one generator process drives on a quiet box: a generator is one thread, and past a few hundred devices on a
 * shared core its own lateness starts to count in the server's figures.
 */
export const DEVICES_PER_GENERATOR = 400;

/**
 * Generator processes for `devices` device slots: one per DEVICES_PER_GENERATOR, fewer devices each when the box is
 * already busy (load average per core above 1: each process then gets less of a core), at most 16.
 * @param {number} devices
 * @param {{ cores?: number, load?: number }} [box] default: this machine's cores and 1-minute load average
 */
export function defaultGenerators(devices, box = {}) {
  const cores = box.cores ?? availableParallelism();
  const load = box.load ?? loadavg()[0] ?? 0;
  const perProcess = Math.max(100, Math.round(DEVICES_PER_GENERATOR / Math.max(1, load / cores)));
  return Math.min(16, Math.max(1, Math.ceil(devices / perProcess)));
}

export class DeviceFleet {
  /** @type {import('node:child_process').ChildProcess[]} */
  procs = [];
  /** @type {any[]} latest report of each generator */
  #last = [];
  /** Segment latency and generator lateness since the last takeWindow(), and since start. */
  window = { segLatency: new Histogram(), lateness: new Histogram(), ackLatency: new Histogram() };
  total = { segLatency: new Histogram(), lateness: new Histogram(), ackLatency: new Histogram() };

  /** @param {FleetOptions} o */
  static async start(o) {
    const f = new DeviceFleet();
    const g = Math.max(1, o.generators ?? defaultGenerators(o.devices.length));
    f.#perGenerator = Math.ceil(o.devices.length / g);
    for (let i = 0; i < g; i++) {
      const proc = track(fork(DEVICES, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' }));
      f.procs.push(proc);
      f.#last.push({});
      proc.on('message', (/** @type {any} */ m) => f.#onMessage(i, m));
      const inited = once(proc, 'message');
      proc.send({
        type: 'init',
        host: o.host,
        port: o.port,
        query: o.query,
        fixtureFile: o.fixtureFile,
        devices: o.devices.slice(i * f.#perGenerator, (i + 1) * f.#perGenerator),
        keepAliveMs: o.keepAliveMs ?? 10_000,
        burst: o.burst ?? 1,
        pauseEveryS: o.pauseEveryS ?? 0,
        pauseS: o.pauseS ?? 5,
        suggest: o.suggest ?? false,
        ack: o.ack ?? false,
        handshakes: o.handshakes ?? 16,
      });
      await inited;
    }
    return f;
  }

  /** Generator processes whose latest report has a session streaming. */
  streamingGenerators() {
    return this.#last.filter((m) => (m.streaming ?? 0) > 0).length;
  }

  get pids() {
    return this.procs.map((p) => /** @type {number} */ (p.pid));
  }

  /**
   * @param {number} i
   * @param {any} m
   */
  #onMessage(i, m) {
    if (m.type !== 'tick' && m.type !== 'stopped') return;
    for (const key of ['segLatency', 'lateness', 'ackLatency']) {
      const h = /** @type {import('../lib/histogram.mjs').HistogramJSON} */ (m[key]);
      /** @type {any} */ (this.window)[key].merge(h);
      /** @type {any} */ (this.total)[key].merge(h);
    }
    this.#last[i] = { ...m, at: performance.now() };
  }

  /**
   * Audio sent so far, in ms, extrapolated to now: a report is up to a second old, and each streaming device has sent
   * that much more audio since (pauses ignored).
   */
  audioMsNow() {
    const now = performance.now();
    return this.#last.reduce((sum, m) => sum + (m.audioMs ?? 0) + (m.at ? (m.streaming - (m.paused ?? 0)) * (now - m.at) : 0), 0);
  }

  /** Device slots per generator: generator i holds slots i × this … (i + 1) × this − 1. */
  #perGenerator = 1;

  /** How many of the first `count` slots belong to generator `i` (slotShare). */
  #share(/** @type {number} */ count, /** @type {number} */ i) {
    return slotShare(count, this.#perGenerator, i);
  }

  /**
   * Opens sessions on slots 0…count-1 and closes the others; `stream`: they stream as soon as they are ready.
   * @param {number} count
   * @param {boolean} stream
   */
  open(count, stream) {
    this.procs.forEach((p, i) => p.send({ type: 'open', count: this.#share(count, i), stream }));
  }

  /** Every ready session starts streaming (each at a random phase of its frame period). */
  stream() {
    for (const p of this.procs) p.send({ type: 'stream' });
  }

  /**
   * Keeps `count` sessions alive that each stream for minS…maxS seconds, leave, and are replaced by a new session.
   * @param {number} count
   * @param {number} minS
   * @param {number} maxS
   */
  churn(count, minS, maxS) {
    this.procs.forEach((p, i) => p.send({ type: 'churn', count: this.#share(count, i), minS, maxS }));
  }

  /** @returns {FleetTotals} the generators' latest counters, summed */
  totals() {
    /** @type {any} */
    const t = { refused: {}, unexpected: {} };
    for (const k of SUMMED) t[k] = 0;
    for (const m of this.#last) {
      for (const k of SUMMED) t[k] += m[k] ?? 0;
      t.backlogMaxMs = Math.max(t.backlogMaxMs ?? 0, m.backlogMaxMs ?? 0);
      for (const k of ['refused', 'unexpected']) for (const [code, n] of Object.entries(m[k] ?? {})) t[k][code] = (t[k][code] ?? 0) + /** @type {number} */ (n);
    }
    return t;
  }

  /** The segment latency and lateness histograms since the previous call. */
  takeWindow() {
    const w = this.window;
    this.window = { segLatency: new Histogram(), lateness: new Histogram(), ackLatency: new Histogram() };
    return w;
  }

  /**
   * Waits until `pred(totals)` holds (checked on every report), or throws after `timeoutMs`.
   * @param {(t: FleetTotals) => boolean} pred
   * @param {number} timeoutMs
   * @param {string} what
   */
  async waitFor(pred, timeoutMs, what) {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.totals())) {
      if (Date.now() > deadline) throw new Error(`devices: timed out waiting for ${what}: ${JSON.stringify(this.totals())}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Closes every session (close frame 1000), waits for the server to close them, returns the final totals. */
  async stop(timeoutMs = 30_000) {
    const stopped = this.procs.map((p) => new Promise((resolve) => {
      const on = (/** @type {any} */ m) => m.type === 'stopped' && (p.off('message', on), resolve(undefined));
      p.on('message', on);
    }));
    for (const p of this.procs) p.send({ type: 'stop', timeoutMs });
    await Promise.all(stopped);
    return this.totals();
  }

  async exit() {
    await Promise.all(
      this.procs.map(async (p) => {
        if (p.exitCode !== null || !p.connected) return;
        const exited = once(p, 'exit');
        p.send({ type: 'exit' });
        const timer = setTimeout(() => p.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}

/**
 * How many of the first `count` device slots generator `i` holds when each holds `perGenerator` consecutive ones.
 * Slots fill the generators in turn, so a ramp step below its largest N runs on about as many generator processes
 * as a fixed run of that N would: dealt round-robin, small steps would spread over every generator, whose timers and
 * wake-ups cost cores the server under test needs.
 * @param {number} count
 * @param {number} perGenerator
 * @param {number} i
 */
export function slotShare(count, perGenerator, i) {
  return Math.max(0, Math.min(perGenerator, count - i * perGenerator));
}
