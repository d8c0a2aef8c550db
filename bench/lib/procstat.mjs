// CPU seconds and RSS of a process (and its children, e.g. ffmpeg decoders) from /proc, and a sampler that keeps them over time.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** Clock ticks per second for /proc/<pid>/stat. */
export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Fields of /proc/<pid>/stat from field 3 (state) on; undefined when the process is gone. */
function statFields(/** @type {number} */ pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * User + system CPU seconds of `pid` (all its threads) plus its reaped children (cutime, cstime).
 * @param {number} pid
 */
export function cpuSeconds(pid) {
  const f = statFields(pid);
  if (!f) return NaN;
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLK_TCK; // fields 14-17
}

/** Live children of every thread of `pid` (a worker thread that spawns ffmpeg is its parent). */
function children(/** @type {number} */ pid) {
  /** @type {number[]} */
  const out = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const list = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      if (list) for (const c of list.split(' ')) out.push(Number(c));
    }
  } catch {
    // gone, or no CONFIG_PROC_CHILDREN: the reaped children's CPU still arrives through cutime/cstime
  }
  return out;
}

/**
 * CPU seconds of `pid` and every live descendant (a process that exits moves its CPU into its parent's cutime/cstime).
 * @param {number} pid
 */
export function treeCpuSeconds(pid) {
  let total = cpuSeconds(pid);
  for (const c of children(pid)) {
    const s = treeCpuSeconds(c);
    if (Number.isFinite(s)) total += s;
  }
  return total;
}

/**
 * Resident set size in bytes, from /proc/<pid>/status; NaN when the process is gone.
 * @param {number} pid
 */
export function rssBytes(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * The RSS a freshly started process settles at: sampled every second for at least `minS` seconds, until the last five
 * samples lie within 1% of each other (at most `maxS`); their median. An idle service shrinks for its first seconds
 * (its first malloc trim, then V8's memory reducer), so an idle figure read at start-up would understate every
 * per-session figure after it. While `busy()` answers true (something else uses the box meanwhile) the samples do
 * not count: the five (or `minS`) come after it, and `maxS` counts from its end.
 * @param {number} pid
 * @param {{ minS?: number, maxS?: number, onSample?: (secondsLeft: number) => void, busy?: () => boolean }} [o]
 */
export async function settledRss(pid, o = {}) {
  const minS = o.minS ?? 20;
  const maxS = Math.max(minS, o.maxS ?? 45);
  /** @type {number[]} */
  let xs = [];
  let busyUntil = 0;
  for (let i = 1; i <= busyUntil + maxS; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    if (o.busy?.()) {
      busyUntil = i;
      xs = [];
      continue;
    }
    xs.push(rssBytes(pid));
    o.onSample?.(busyUntil + maxS - i);
    const last = xs.slice(-5);
    if (i >= minS && last.length >= Math.min(5, minS) && Math.max(...last) <= Math.min(...last) * 1.01) break;
  }
  return median(xs.slice(-5));
}

/**
 * CPU seconds of each thread of `pid` so far, by thread id, with the thread's name (its comm: Node leaves every thread
 * `node`; the service names its task threads `task-<handler>`, e.g. `task-decode` for a codec shard).
 * @param {number} pid
 * @returns {Map<number, { name: string, cpuS: number }>}
 */
export function threadTimes(pid) {
  const out = new Map();
  let tids;
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const f = stat.slice(close + 2).split(' ');
      out.set(Number(tid), { name: stat.slice(stat.indexOf('(') + 1, close), cpuS: (Number(f[11]) + Number(f[12])) / CLK_TCK });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * CPU cores each kind of thread of `pid` used between two threadTimes() reads `seconds` apart: the main thread (its
 * id is the pid), each named task thread (`task-decode 1`, `task-decode 2`, … in thread id order), and every other
 * thread together (V8's platform workers: concurrent marking, sweeping and compilation; libuv's pool). A thread that
 * ended meanwhile is left out.
 * @param {number} pid
 * @param {Map<number, { name: string, cpuS: number }>} before
 * @param {Map<number, { name: string, cpuS: number }>} after
 * @param {number} seconds
 * @returns {{ thread: string, cores: number }[]}
 */
export function threadCores(pid, before, after, seconds) {
  /** @type {Map<string, number>} */
  const by = new Map([['main', 0]]);
  /** @type {Map<string, number>} */
  const seen = new Map();
  let helpers = 0;
  for (const [tid, t] of [...after.entries()].sort((a, b) => a[0] - b[0])) {
    const used = t.cpuS - (before.get(tid)?.cpuS ?? 0);
    if (tid === pid) by.set('main', used);
    else if (t.name.startsWith('task-')) {
      const n = (seen.get(t.name) ?? 0) + 1;
      seen.set(t.name, n);
      by.set(`${t.name} ${n}`, used);
    } else helpers += used;
  }
  by.set('V8 and libuv helpers', helpers);
  return [...by.entries()].map(([thread, cpuS]) => ({ thread, cores: Math.round((cpuS / seconds) * 1000) / 1000 }));
}

/** CPU seconds of this process and its children so far (what a bench process spends itself). */
export function selfCpuSeconds() {
  return treeCpuSeconds(process.pid);
}

/**
 * @typedef {object} ProcSample
 * @property {number} t seconds since the sampler started
 * @property {Record<string, { cpu: number, rssMiB: number, cores: number }>} procs cumulative CPU seconds, RSS, and CPU cores used since the previous sample
 */

/** Samples CPU and RSS of named processes every `intervalMs`; `add()` watches more while it runs. */
export class ProcSampler {
  /** @type {ProcSample[]} */
  samples = [];
  /** @type {Map<string, number>} */
  #pids = new Map();
  /** @type {Map<string, { t: number, cpu: number }>} */
  #last = new Map();
  /** @type {NodeJS.Timeout | undefined} */
  #timer;
  #t0 = performance.now();

  /** @param {number} [intervalMs] */
  constructor(intervalMs = 1000) {
    this.intervalMs = intervalMs;
  }

  /**
   * @param {string} name
   * @param {number} pid
   */
  add(name, pid) {
    this.#pids.set(name, pid);
    this.#last.set(name, { t: this.elapsed(), cpu: treeCpuSeconds(pid) });
  }

  /** @param {string} name */
  remove(name) {
    this.#pids.delete(name);
  }

  elapsed() {
    return (performance.now() - this.#t0) / 1000;
  }

  start() {
    this.#t0 = performance.now();
    for (const [name, pid] of this.#pids) this.#last.set(name, { t: 0, cpu: treeCpuSeconds(pid) });
    this.#timer = setInterval(() => this.sample(), this.intervalMs);
    this.#timer.unref();
    return this;
  }

  /** Takes one sample now; returns it. */
  sample() {
    const t = this.elapsed();
    /** @type {ProcSample['procs']} */
    const procs = {};
    for (const [name, pid] of this.#pids) {
      const cpu = treeCpuSeconds(pid);
      if (!Number.isFinite(cpu)) continue;
      const last = this.#last.get(name) ?? { t, cpu };
      const dt = t - last.t;
      procs[name] = { cpu, rssMiB: Math.round((rssBytes(pid) / 2 ** 20) * 10) / 10, cores: dt > 0 ? Math.round(((cpu - last.cpu) / dt) * 1000) / 1000 : 0 };
      this.#last.set(name, { t, cpu });
    }
    const s = { t: Math.round(t * 10) / 10, procs };
    this.samples.push(s);
    return s;
  }

  stop() {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Chart lines of one figure (cores or rssMiB) for every watched process.
   * @param {'cores' | 'rssMiB'} key
   * @param {(name: string) => boolean} [which]
   * @returns {{ name: string, points: [number, number][], dashed: boolean }[]} lines of the bare baseline's run dashed
   */
  lines(key, which = () => true) {
    /** @type {Map<string, [number, number][]>} */
    const out = new Map();
    for (const s of this.samples) {
      for (const [name, p] of Object.entries(s.procs)) {
        if (!which(name)) continue;
        if (!out.has(name)) out.set(name, []);
        out.get(name)?.push([s.t, p[key]]);
      }
    }
    return [...out.entries()].map(([name, points]) => ({ name, points, dashed: name.includes('bare') }));
  }
}

/**
 * The middle sample (the upper middle of an even count); NaN for none. RSS samples: the steady level a single sample
 * misses, as each lands anywhere between a garbage collection and the next.
 * @param {number[]} xs
 */
export const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/**
 * Bytes of the files under `dir`, recursively (0 when it does not exist): what a run left on disk.
 * @param {string} dir
 */
export function dirBytes(dir) {
  let n = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    try {
      n += e.isDirectory() ? dirBytes(p) : statSync(p).size;
    } catch {
      // removed meanwhile (retention, a session's log closing)
    }
  }
  return n;
}
