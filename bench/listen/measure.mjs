// Measurement loops shared by fleet, limit and churn: one observed window (latency, CPU, RSS, loss), the capacity ramp,
// the drain that settles the loss count, and the timeline the HTML charts are drawn from.
// One file because the window, the ramp and the drain share the timeline they write.
import { Histogram } from '../lib/histogram.mjs';
import { median, rssBytes, threadCores, threadTimes, treeCpuSeconds } from '../lib/procstat.mjs';

/**
 * A ramp step passes when, for its whole hold, every session it asked for streams and none is closed, the receiving
 * end's lag p99 (PCM out of the bare server, or into the provider fake behind the service) stays under RAMP_P99_MS,
 * at least RAMP_RECEIVED_MIN of the audio sent in the window arrives there, no device's unsent backlog exceeds
 * RAMP_BACKLOG_MS of its audio, and the generator itself sends on time (lateness p99 ≤ RAMP_LATE_MS: past it the step
 * measures the generator, not the server). The same criteria hold both sides of the ratio.
 */
export const RAMP_P99_MS = 300;
export const RAMP_RECEIVED_MIN = 0.99;
export const RAMP_BACKLOG_MS = 1000;
export const RAMP_LATE_MS = 50;
/** Audio per session that may be on its way (decoder, send plan, provider batching) at either end of a window, ms. */
export const RAMP_IN_FLIGHT_MS = 250;
const LAG_EVERY_S = 2;
const round = (/** @type {number} */ v, /** @type {number} */ d = 1) => (Number.isFinite(v) ? Math.round(v * 10 ** d) / 10 ** d : null);

/** Chart lines filled as the run goes: key -> line name -> points [t, v]. */
export class Timeline {
  /** @type {Map<string, Map<string, [number, number][]>>} */
  charts = new Map();
  t0 = performance.now();
  now() {
    return Math.round((performance.now() - this.t0) / 100) / 10;
  }
  /**
   * @param {string} chart
   * @param {string} line
   * @param {number | null | undefined} v
   * @param {number} [t]
   */
  add(chart, line, v, t = this.now()) {
    if (typeof v !== 'number' || !Number.isFinite(v)) return;
    if (!this.charts.has(chart)) this.charts.set(chart, new Map());
    const c = /** @type {Map<string, [number, number][]>} */ (this.charts.get(chart));
    if (!c.has(line)) c.set(line, []);
    c.get(line)?.push([t, v]);
  }
  /**
   * @param {string} chart
   * @param {string} title
   * @param {string} yLabel
   */
  chart(chart, title, yLabel) {
    return { title, yLabel, lines: [...(this.charts.get(chart) ?? new Map()).entries()].map(([name, points]) => ({ name, points, dashed: name.startsWith('bare') })) };
  }
}

/**
 * @typedef {object} Ctx
 * @property {import('./device-fleet.mjs').DeviceFleet} fleet
 * @property {import('./stack.mjs').ProviderStats | undefined} stats where PCM arrives (provider fake or bare server); undefined: not measured
 * @property {string} target 'service' or 'bare'
 * @property {number} pid the target's process
 * @property {Timeline} timeline
 * @property {import('../lib/progress.mjs').Progress} progress
 * @property {number} [fakePid] the provider fake's process, when the target streams to one (its CPU shares the box)
 * @property {() => Promise<EngineMetrics>} [engineMetrics] the service's own figures from its /metrics; absent for the bare server
 * @property {(devices: number) => Promise<{ ended: number, ms: number, idle: boolean } | null>} [endConversations]
 *   the service only: the first `devices` devices' users end their conversations (stack.mjs endConversations) and
 *   it waits for their processing
 */

/**
 * @typedef {{ heapUsed: number, heapTotal: number, external: number, mallocInUse: number, mallocFree: number, codecHeapUsed?: number, codecHeapTotal?: number }} ServiceMemory
 *   the service's memory split at one moment, in bytes (stack.mjs memory())
 */

/**
 * @typedef {object} EngineMetrics one read of the service's /metrics (stack.mjs engineMetrics())
 * @property {[number, number][]} decodeBuckets listen_decode_delay_seconds' cumulative buckets, [upper bound s, count]
 * @property {number} loopP99S the main thread's event-loop delay p99 since the previous read, in seconds
 * @property {number} keptS audio kept for later transcription after provider failures since the service started, in seconds
 * @property {number} liveSessions listen_sessions: the sessions the service holds, those still finishing included
 * @property {number} gcS seconds the main thread's V8 spent collecting garbage since the service started
 */

/**
 * Percentile `q` (0–1) of the observations between two reads of one cumulative histogram, interpolated linearly
 * within its bucket; the largest finite bound when it falls in +Inf; null with no observation.
 * @param {[number, number][]} before
 * @param {[number, number][]} after
 * @param {number} q
 */
export function bucketPercentile(before, after, q) {
  const d = after.map(([le, n], i) => /** @type {[number, number]} */ ([le, n - (before[i]?.[1] ?? 0)]));
  const total = d.at(-1)?.[1] ?? 0;
  if (total <= 0) return null;
  const want = q * total;
  let prevLe = 0;
  let prevN = 0;
  for (const [le, n] of d) {
    if (n >= want) {
      if (!Number.isFinite(le)) return prevLe;
      return n > prevN ? prevLe + ((le - prevLe) * (want - prevN)) / (n - prevN) : le;
    }
    prevLe = le;
    prevN = n;
  }
  return prevLe;
}

/**
 * The engine's own delay over a window from two reads of its metrics, in ms: decode delay p50/p99 and count, and the
 * main thread's event-loop delay p99 (the second read's, since the first).
 * @param {EngineMetrics | undefined} a
 * @param {EngineMetrics | undefined} b
 */
function engineDelays(a, b) {
  if (!a || !b) return null;
  const ms = (/** @type {number | null} */ x) => (x === null ? null : round(x * 1000));
  return {
    decodeCount: (b.decodeBuckets.at(-1)?.[1] ?? 0) - (a.decodeBuckets.at(-1)?.[1] ?? 0),
    decodeP50Ms: ms(bucketPercentile(a.decodeBuckets, b.decodeBuckets, 0.5)),
    decodeP99Ms: ms(bucketPercentile(a.decodeBuckets, b.decodeBuckets, 0.99)),
    loopLagP99Ms: ms(Number.isFinite(b.loopP99S) ? b.loopP99S : null),
    gcS: Number.isFinite(b.gcS) && Number.isFinite(a.gcS) ? round(b.gcS - a.gcS, 3) : null,
  };
}

/**
 * Lag summaries of several windows as one: exact when the source sends its histogram (the bare server), else estimated
 * (the provider fake sends percentiles only): each window's distribution is taken as linear between 0, its p50, p95,
 * p99 and max, and the percentiles of the count-weighted mixture are solved for.
 * @param {any[]} windows
 */
export function mergeLag(windows) {
  const ws = windows.filter((w) => w.lagMs && w.lagMs.count > 0);
  if (ws.length === 0) return { count: 0, p50: null, p95: null, p99: null, max: null, exact: true };
  if (ws.every((w) => w.lagHistogram)) {
    const h = new Histogram();
    for (const w of ws) h.merge(w.lagHistogram);
    return { ...h.summary(), exact: true };
  }
  const count = ws.reduce((n, w) => n + w.lagMs.count, 0);
  const max = Math.max(...ws.map((w) => w.lagMs.max ?? 0));
  /** Share of all chunks at or below `x` ms. */
  const cdf = (/** @type {number} */ x) => {
    let below = 0;
    for (const w of ws) {
      const l = w.lagMs;
      /** @type {[number, number][]} */
      const pts = [[0, 0], [l.p50, 0.5], [l.p95, 0.95], [l.p99, 0.99], [l.max, 1]];
      let f = 1;
      for (let i = 1; i < pts.length; i++) {
        const [x0, q0] = /** @type {[number, number]} */ (pts[i - 1]);
        const [x1, q1] = /** @type {[number, number]} */ (pts[i]);
        if (x <= x1) {
          f = x1 > x0 ? q0 + ((q1 - q0) * (x - x0)) / (x1 - x0) : q1;
          break;
        }
      }
      below += f * l.count;
    }
    return below / count;
  };
  const at = (/** @type {number} */ q) => {
    let lo = 0;
    let hi = max;
    for (let i = 0; i < 40; i++) {
      const mid = (lo + hi) / 2;
      if (cdf(mid) < q) lo = mid;
      else hi = mid;
    }
    return round(hi);
  };
  return { count, p50: at(0.5), p95: at(0.95), p99: at(0.99), max, exact: false };
}

/** Bytes as MiB with one decimal. */
export const mib = (/** @type {number} */ b) => Math.round((b / 2 ** 20) * 10) / 10;

/**
 * The service's memory split at one moment: a growing RSS is either the JS heap (committed or live), glibc's kept-free
 * memory (fragmentation, not a leak) or native memory in use. Only churn samples it: each /metrics scrape resets the
 * event-loop delay histogram that fleet's loop p99 reads once per window.
 * @param {Timeline} timeline
 * @param {ServiceMemory} m
 */
export function memoryLines(timeline, m) {
  timeline.add('memory', 'JS heap committed', mib(m.heapTotal));
  timeline.add('memory', 'JS heap used', mib(m.heapUsed));
  timeline.add('memory', 'malloc in use', mib(m.mallocInUse));
  timeline.add('memory', 'malloc kept free', mib(m.mallocFree));
  if (m.codecHeapTotal !== undefined) timeline.add('memory', 'codec threads JS heap committed', mib(m.codecHeapTotal));
  if (m.codecHeapUsed !== undefined) timeline.add('memory', 'codec threads JS heap used', mib(m.codecHeapUsed));
}

/**
 * Watches a running load for `seconds`: every second the progress bar and the sessions/CPU/RSS lines, every 2 s the
 * latency lines. Returns the window's figures.
 * @param {Ctx} ctx
 * @param {{ seconds: number, label: string, sessions: number, failFast?: (w: { behindMs: number, unexpected: number }) => boolean }} o
 */
export async function observe(ctx, o) {
  const { fleet, stats, timeline, progress } = ctx;
  const genPids = fleet.pids;
  const cpu0 = treeCpuSeconds(ctx.pid);
  const threads0 = threadTimes(ctx.pid);
  const genEach0 = genPids.map((p) => treeCpuSeconds(p));
  const fake0 = ctx.fakePid ? treeCpuSeconds(ctx.fakePid) : NaN;
  // CPU is read from here: a target that does not answer the first /stats below still spent its CPU meanwhile.
  const cpuStart = performance.now();
  const t0 = fleet.totals();
  const unexpected0 = Object.values(t0.unexpected).reduce((a, b) => a + b, 0);
  // A fresh lag window; an overloaded target that cannot answer even this fails the step (it must not end the run).
  /** @type {{ bytes: number, chunks: number } | undefined} */
  let totals0;
  const sent0Before = fleet.audioMsNow();
  const unanswered = stats ? await stats.window().then((s) => ((totals0 = s), false), () => true) : false;
  /** Audio sent when the window's first totals were read, in ms (the mean of before and after the read). */
  const sent0 = (sent0Before + fleet.audioMsNow()) / 2;
  let sentLast = sent0;
  let backlogMaxMs = 0;
  const delays0 = await ctx.engineMetrics?.().catch(() => undefined);
  fleet.takeWindow();
  const seg = new Histogram();
  const late = new Histogram();
  const ack = new Histogram();
  /** @type {any[]} */
  const windows = [];
  let rssMax = 0;
  /** @type {number[]} */
  const rssSamples = [];
  let last = { behindMs: 0, receivedMs: NaN };
  const start = performance.now();
  progress.phase(o.label, o.seconds);
  let failed = unanswered;
  let statsTimeouts = unanswered ? 1 : 0;
  for (let i = 1; i <= o.seconds && !failed; i++) {
    await new Promise((r) => setTimeout(r, Math.max(0, start + i * 1000 - performance.now())));
    const t = fleet.totals();
    const w = fleet.takeWindow();
    seg.merge(w.segLatency);
    late.merge(w.lateness);
    ack.merge(w.ackLatency);
    backlogMaxMs = Math.max(backlogMaxMs, t.backlogMaxMs ?? 0);
    const rss = rssBytes(ctx.pid);
    rssMax = Math.max(rssMax, rss);
    rssSamples.push(rss);
    timeline.add('sessions', `${ctx.target} streaming`, t.streaming);
    timeline.add('rss', `${ctx.target} RSS`, rss / 2 ** 20);
    if (w.segLatency.count > 0) timeline.add('segments', `${ctx.target} segment p95`, w.segLatency.percentile(95));
    if (stats && (i % LAG_EVERY_S === 0 || i === o.seconds)) {
      const sentBefore = fleet.audioMsNow();
      /** @type {any} */
      let s;
      try {
        s = await stats.window();
      } catch {
        // An overloaded target stops answering its /stats in time: the window is lost and the step fails.
        statsTimeouts++;
        failed = true;
        break;
      }
      const sentMs = (sentBefore + fleet.audioMsNow()) / 2;
      sentLast = sentMs;
      windows.push(s);
      for (const k of ['p50', 'p95', 'p99', 'max']) timeline.add('latency', `${ctx.target} ${k}`, s.lagMs?.[k]);
      last = { behindMs: sentMs - s.bytes / 32, receivedMs: s.bytes / 32 };
    }
    const unexpected = Object.values(t.unexpected).reduce((a, b) => a + b, 0) - unexpected0;
    const lag = windows.at(-1)?.lagMs;
    progress.update(i, `${t.streaming} streaming  p99 ${lag?.p99 ?? '-'} ms  closed early ${unexpected}`);
    if (o.failFast?.({ behindMs: last.behindMs / Math.max(1, o.sessions), unexpected })) failed = true;
  }
  const wallS = (performance.now() - start) / 1000;
  const cpuS = treeCpuSeconds(ctx.pid) - cpu0;
  const genEach = genPids.map((p, i) => treeCpuSeconds(p) - (genEach0[i] ?? 0));
  const genS = genEach.reduce((s, c) => s + c, 0);
  const threads = threadCores(ctx.pid, threads0, threadTimes(ctx.pid), (performance.now() - cpuStart) / 1000);
  const fakeS = ctx.fakePid ? treeCpuSeconds(ctx.fakePid) - fake0 : NaN;
  const cpuWallS = (performance.now() - cpuStart) / 1000;
  const delays1 = delays0 && (await ctx.engineMetrics?.().catch(() => undefined));
  const t1 = fleet.totals();
  const sessionSeconds = o.sessions * cpuWallS;
  const lastTotals = windows.at(-1);
  const sentInWindowMs = sentLast - sent0;
  const refusals = (/** @type {import('./device-fleet.mjs').FleetTotals} */ t) => Object.values(t.refused).reduce((a, b) => a + b, 0);
  return {
    sessions: o.sessions,
    // Devices streaming at the window's end, and refusals (1013: busy or full) during it.
    streamingAtEnd: t1.streaming,
    refused: refusals(t1) - refusals(t0),
    wallS: round(wallS, 2),
    stoppedEarly: failed,
    statsTimeouts,
    lag: mergeLag(windows),
    segLatency: seg.summary(),
    lateness: late.summary(),
    ackLatency: ack.summary(),
    engine: engineDelays(delays0, delays1),
    serverCpuS: round(cpuS, 2),
    serverCores: round(cpuS / cpuWallS, 3),
    serverCpuUsPerSessionS: round((cpuS / sessionSeconds) * 1e6, 0),
    generatorCpuS: round(genS, 2),
    generatorCores: round(genS / cpuWallS, 3),
    generatorCpuUsPerSessionS: round((genS / sessionSeconds) * 1e6, 0),
    // Generator processes with sessions streaming, and the busiest one's cores (one near 1 is saturated).
    generators: fleet.streamingGenerators(),
    busiestGeneratorCores: round(Math.max(0, ...genEach) / cpuWallS, 3),
    // The largest share of a device's audio still in its socket's send buffer at any second of the window, in ms.
    backlogMaxMs: round(backlogMaxMs, 0),
    // Audio that arrived at the receiving end over audio sent, in the window (null where nothing is measured).
    receivedShare: totals0 && lastTotals && sentInWindowMs > 0 ? round((lastTotals.bytes - totals0.bytes) / 32 / sentInWindowMs, 4) : null,
    shortMsPerSession: totals0 && lastTotals ? round((sentInWindowMs - (lastTotals.bytes - totals0.bytes) / 32) / Math.max(1, o.sessions)) : null,
    // Cores of the target's threads: the main thread, each task thread, V8's and libuv's helpers.
    threads,
    // null without a fake (the bare server counts its own PCM)
    fakeCores: round(fakeS / cpuWallS, 3),
    // PCM per message the target received over the window (cumulative totals; 16 kHz s16le: 32 bytes per ms).
    messageMs: messageMs(totals0, windows.at(-1)),
    rssMiB: round(rssBytes(ctx.pid) / 2 ** 20),
    // The steady level: a single sample swings widely with the collector and malloc_trim.
    rssMedianMiB: round(median(rssSamples.length > 0 ? rssSamples : [rssBytes(ctx.pid)]) / 2 ** 20),
    rssMaxMiB: round(rssMax / 2 ** 20),
    behindMsPerSession: round(last.behindMs / Math.max(1, o.sessions)),
    unexpectedCloses: Object.values(t1.unexpected).reduce((a, b) => a + b, 0) - unexpected0,
    framesSent: t1.frames - t0.frames,
  };
}

/**
 * Closes every session and waits until the PCM stops arriving: then frames lost = audio sent − PCM received − the
 * codec's own delay (AAC's priming frame, once per stream). Audio a session sent again to a new provider stream after
 * a provider failed arrives twice: when more arrived than was sent, the surplus is counted as re-sent, not as a
 * negative loss (a loss it hides is not seen).
 * @param {Ctx} ctx
 * @param {{ frameMs: number, primingFrames: number }} codec
 */
export async function drain(ctx, codec) {
  const { frameMs } = codec;
  ctx.progress.phase(`${ctx.target}: closing sessions`, 1);
  const totals = await ctx.fleet.stop();
  ctx.progress.update(1);
  const codecDelayMs = codec.primingFrames * frameMs * totals.streams;
  if (!ctx.stats) return { totals, receivedMs: null, codecDelayMs, lostMs: null, lostFrames: null, streamsLeftOpen: null };
  let prev = -1;
  /** @type {Awaited<ReturnType<NonNullable<Ctx['stats']>['get']>> | undefined} */
  let s;
  // Until every stream is closed and the bytes stop moving (an overloaded target may answer late: keep asking).
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 500));
    s = await ctx.stats.get().catch(() => s);
    if (s && s.streamsOpen === 0 && s.bytes === prev) break;
    prev = s?.bytes ?? -1;
  }
  if (!s) return { totals, receivedMs: null, codecDelayMs, lostMs: null, lostFrames: null, streamsLeftOpen: null };
  const receivedMs = s.bytes / 32; // 16 kHz s16le: 32 bytes per ms
  const lostMs = totals.audioMs - receivedMs - codecDelayMs;
  // What the service kept for later after a provider failed: not lost, though it never reached the provider live (it
  // also holds audio the provider got but never answered for, so it may exceed what the provider missed). A session
  // whose provider failed keeps its audio before it closes: read it once the service holds none (bounded).
  let engine = await ctx.engineMetrics?.().catch(() => undefined);
  for (const deadline = Date.now() + 60_000; engine && engine.liveSessions > 0 && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 500));
    engine = (await ctx.engineMetrics?.().catch(() => undefined)) ?? engine;
  }
  const keptS = engine?.keptS;
  const keptFrames = keptS === undefined || Number.isNaN(keptS) ? null : Math.round((keptS * 1000) / frameMs);
  const netFrames = Math.round(lostMs / frameMs);
  return { totals, receivedMs: round(receivedMs, 1), codecDelayMs: round(codecDelayMs, 1), lostMs: round(lostMs, 1), lostFrames: Math.max(0, netFrames), resentFrames: Math.max(0, -netFrames), keptFrames, streamsLeftOpen: s.streamsOpen };
}

/**
 * Mean PCM per message between two /stats totals, in ms.
 * @param {{ bytes: number, chunks: number } | undefined} a
 * @param {{ bytes: number, chunks: number } | undefined} b
 */
function messageMs(a, b) {
  if (a === undefined || b === undefined || b.chunks <= a.chunks) return null;
  return round((b.bytes - a.bytes) / 32 / (b.chunks - a.chunks), 1);
}

/**
 * Why a ramp step fails (empty: it passes); the criteria of RAMP_P99_MS.
 * @param {any} w the step's window (observe())
 * @param {number} n sessions asked for
 * @param {boolean} opened whether all of them were streaming before the window
 * @returns {string[]}
 */
export function stepFailures(w, n, opened) {
  return [
    opened ? '' : `not all ${n} streaming`,
    w.unexpectedCloses > 0 ? `${w.unexpectedCloses} closed` : '',
    w.lag.p99 === null || w.lag.p99 >= RAMP_P99_MS ? `p99 ≥ ${RAMP_P99_MS} ms` : '',
    // Short of the share, and by more than a session's audio in flight at the window's ends (a short window of few
    // sessions measures those, not a loss).
    typeof w.receivedShare === 'number' && w.receivedShare < RAMP_RECEIVED_MIN && (w.shortMsPerSession ?? Infinity) > RAMP_IN_FLIGHT_MS ? `${Math.round(w.receivedShare * 1000) / 10}% of the audio arrived` : '',
    (w.backlogMaxMs ?? 0) > RAMP_BACKLOG_MS ? `a device ${w.backlogMaxMs} ms behind in sending` : '',
    (w.lateness?.p99 ?? 0) > RAMP_LATE_MS ? `generator late (p99 ${w.lateness.p99} ms)` : '',
    w.statsTimeouts > 0 ? '/stats not answered in 5 s' : w.stoppedEarly ? 'stopped early' : '',
  ].filter(Boolean);
}

/**
 * One capacity search: grows the number of streaming sessions until a step fails (stepFailures), then bisects; each
 * step holds `holdS` seconds. Capacity = the largest passing N.
 * `step()` runs one step and answers whether the search is over, so two searches can take turns (`rampTogether`).
 */
export class RampSearch {
  /** @type {any[]} */
  steps = [];
  lo = 0;
  hi = Infinity;
  done = false;
  /**
   * @param {Ctx} ctx
   * @param {{ from: number, max: number, holdS: number, settleS: number, sessionsWanted: (n: number) => void, rounds?: number, probe?: number }} o
   *   `probe`: a step the way up holds on its way past (default: none)
   *   `rounds`: no search: `from` sessions, step after step, until that many steps were measured (a step held again
   *   counts once)
   */
  constructor(ctx, o) {
    this.ctx = ctx;
    this.o = o;
    this.n = o.from;
    this.lastN = 0;
  }

  get result() {
    return { capacity: this.lo, firstFail: Number.isFinite(this.hi) ? this.hi : null, steps: this.steps };
  }

  /** Runs the next step at `this.n` sessions and picks the one after it; sets `done` when the search is over. */
  async step() {
    const { ctx, o } = this;
    const n = this.n;
    /** The sessions of the step run last (this.n moves on to the next). */
    this.lastN = n;
    o.sessionsWanted(n);
    ctx.progress.phase(`${ctx.target}: opening ${n} sessions`, n);
    let opened = true;
    try {
      await ctx.fleet.waitFor((t) => (ctx.progress.update(t.streaming), t.streaming >= n && t.connecting === 0), 30_000 + n * 50, `${n} streaming sessions`);
    } catch {
      opened = false;
    }
    await new Promise((r) => setTimeout(r, o.settleS * 1000));
    /** @type {any} */
    let w;
    /** @type {string[]} */
    let why;
    for (let attempt = 0; ; attempt++) {
      const startedS = ctx.timeline.now();
      w = await observe(ctx, {
        seconds: o.holdS,
        label: `${ctx.target}: ${n} sessions${attempt > 0 ? ' (held again)' : ''}`,
        sessions: n,
        failFast: (x) => x.unexpected > 0 || x.behindMs > 1000,
      });
      // When the window ran, in the run's seconds (the ramps' turns can be read off them).
      w = { ...w, startedS, endedS: ctx.timeline.now() };
      why = stepFailures(w, n, opened);
      // Latency alone over the line (the server's or the generator's), nothing lost, nothing piling up: on a shared
      // host one stall of a few hundred ms does that to a server far from saturation. Such a step is held once more
      // and counts only if it fails again; saturation (a backlog, closes) fails at once.
      const stallOnly = w.lag.p99 !== null && why.length > 0 && why.every((x) => x.startsWith('p99') || x.startsWith('generator late'));
      if (attempt > 0 || !stallOnly) break;
      this.steps.push({ ...w, pass: false, why: why.join(', '), opened, heldAgain: true });
      ctx.progress.log(`${ctx.target}: ${n} sessions p99 ${w.lag.p99} ms, generator late p99 ${w.lateness.p99} ms, with no backlog (server ${w.serverCores} cores): held once more`);
      await new Promise((r) => setTimeout(r, o.settleS * 1000));
    }
    const pass = why.length === 0;
    this.steps.push({ ...w, pass, why: why.join(', '), opened });
    ctx.progress.log(`${ctx.target}: ${n} sessions ${pass ? 'pass' : `FAIL: ${why.join(', ')}`} (p99 ${w.lag.p99} ms, received ${w.receivedShare === null ? '-' : `${Math.round(w.receivedShare * 1000) / 10}%`}, server ${w.serverCores} cores, generator ${w.generatorCores} cores over ${w.generators} processes, late p99 ${w.lateness.p99} ms, closed early ${w.unexpectedCloses})`);
    if (pass) this.lo = Math.max(this.lo, n);
    else this.hi = Math.min(this.hi, n);
    this.done = this.#next(pass);
    return pass;
  }

  /** Picks the next N after a step at `this.n`; answers true when there is none. */
  #next(/** @type {boolean} */ pass) {
    const { lo, hi, o } = this;
    if (o.rounds !== undefined) return this.steps.filter((s) => !s.heldAgain).length >= o.rounds;
    if (pass && this.n >= o.max) return true;
    if (hi === Infinity) {
      const next = Math.min(o.max, Math.ceil((this.n * 1.5) / 50) * 50);
      // The way up passes through the probe (per-thread CPU is compared there), unless it starts above it.
      this.n = o.probe !== undefined && this.n < o.probe && next > o.probe ? o.probe : next;
      return false;
    }
    const grain = Math.max(25, Math.round(lo * 0.04));
    if (hi - lo <= grain) return true;
    const n = lo + Math.round((hi - lo) / 2 / 25) * 25 || lo + Math.ceil((hi - lo) / 2);
    this.n = n;
    return n <= lo || n >= hi;
  }
}

/**
 * The capacity search of one target, step after step.
 * @param {Ctx} ctx
 * @param {ConstructorParameters<typeof RampSearch>[1]} o
 */
export async function ramp(ctx, o) {
  const search = new RampSearch(ctx, o);
  while (!search.done) {
    const pass = await search.step();
    // A failed step leaves a backlog: shed load and let it recover before the next (smaller) step.
    if (!pass && !search.done) {
      o.sessionsWanted(Math.min(search.n, search.lo));
      await new Promise((r) => setTimeout(r, 5000));
    }
  }
  return search.result;
}

/**
 * Two capacity searches taking turns step by step, each target's sessions closed while the other one steps, so that
 * both see the same state of a shared host (ramped one after the other, whichever goes second pays for the host's
 * drift). The order within a round alternates. Each search ends on its own.
 * @param {RampSearch[]} searches
 * @param {{ quietS: number }} o seconds to wait after closing one target's sessions before the other steps
 */
export async function rampTogether(searches, o) {
  for (let round = 0; searches.some((s) => !s.done); round++) {
    const order = round % 2 === 0 ? searches : [...searches].reverse();
    for (const s of order) {
      if (s.done) continue;
      await s.step();
      s.o.sessionsWanted(0);
      s.ctx.progress.phase(`${s.ctx.target}: closing sessions`, 1);
      await s.ctx.fleet.waitFor((t) => t.streaming + t.connecting + t.open + t.ready === 0, 60_000, `${s.ctx.target}: every session closed`).catch(() => {});
      if (s.ctx.endConversations) {
        // Else each conversation's processing comes 120 s later (its idle check), inside another step's window,
        // on the same cores.
        s.ctx.progress.phase(`${s.ctx.target}: ending the step's conversations and waiting for their processing`, 1);
        const e = await s.ctx.endConversations(s.lastN).catch((/** @type {Error} */ err) => (s.ctx.progress.log(`${s.ctx.target}: ending conversations failed: ${err.message}`), null));
        if (e) s.ctx.progress.log(`${s.ctx.target}: ${e.ended} conversations ended and processed in ${(e.ms / 1000).toFixed(1)} s${e.idle ? '' : ' (processing still busy at the time limit)'}`);
      }
      await new Promise((r) => setTimeout(r, o.quietS * 1000));
    }
  }
  return searches.map((s) => s.result);
}
