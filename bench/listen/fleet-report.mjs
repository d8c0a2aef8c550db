// Turns a fixed-size fleet run into the common result (summary table, goals, figures for `compare`, charts, notes),
// and the pieces every listen report shares (goals, charts, profile tables, cell formatting).
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { summarize } from '../lib/cpuprofile.mjs';
import { ROOT_DIR, figuresOf, finish } from '../lib/report.mjs';
import { RAMP_P99_MS } from './measure.mjs';

/** The capacity, CPU and memory goals each listen report checks. */
export const GOALS = { capacityShareOfLimit: 0.8, minCapacity: 1200, cpuRatioMax: 1.3, rssPerSessionKiBMax: 128, churnRssGrowthMax: 0.1 };

export const LATENCY_NOTE =
  'frame latency: per PCM chunk where it arrives (provider fake or bare server), arrival − (T0 + audio position), T0 being the stream’s least-delayed chunk; so the delay beyond the best chunk, including the generator’s own lateness';
export const ENGINE_DELAY_NOTE =
  "engine decode delay: the service's own listen_decode_delay_seconds over the window (per decode task, from its longest-waiting audio being complete for the provider to its PCM back on the main thread); loop p99: the main thread's event-loop delay (nodejs_eventloop_lag_p99_seconds); both from /metrics";
/** The service's own delays over a window (observe()'s `engine`) as one cell. */
export const engineDelayCell = (/** @type {{ decodeP50Ms: number | null, decodeP99Ms: number | null, loopLagP99Ms: number | null } | null | undefined} */ e) => (e ? `${v(e.decodeP50Ms)} / ${v(e.decodeP99Ms)}, ${v(e.loopLagP99Ms)}` : '-');
const SEGMENT_NOTE = 'segment latency: from the device sending the audio a segment ends at to the segment reaching the device (provider answer, engine, the 600 ms loop and the socket included)';

export const v = (/** @type {unknown} */ x) => (x === null || x === undefined || (typeof x === 'number' && !Number.isFinite(x)) ? '-' : String(x));
/** @param {{ p50: number | null, p95: number | null, p99: number | null, max?: number | null } | undefined} l */
export const pct = (l) => (l && l.p50 !== null ? `${v(l.p50)} / ${v(l.p95)} / ${v(l.p99)}${l.max !== undefined ? ` / ${v(l.max)}` : ''}` : '-');
export const ratio = (/** @type {number | null | undefined} */ a, /** @type {number | null | undefined} */ b) => (typeof a === 'number' && typeof b === 'number' && b > 0 ? Math.round((a / b) * 100) / 100 : null);
const round3 = (/** @type {number} */ x) => Math.round(x * 1000) / 1000;
export const kib = (/** @type {number} */ bytes, /** @type {number} */ n) => (n > 0 && Number.isFinite(bytes) ? Math.round(bytes / n / 1024) : null);

/**
 * Charts every listen run has: latency over time, sessions, CPU and RSS of every process.
 * @param {import('./measure.mjs').Timeline} timeline
 * @param {import('../lib/procstat.mjs').ProcSampler} sampler
 */
export function charts(timeline, sampler) {
  const xDomain = [0, timeline.now()];
  return /** @type {any[]} */ ([
    timeline.chart('latency', 'Frame latency per 2 s window (device → PCM at the provider / bare server)', 'ms'),
    timeline.chart('segments', 'Segment latency p95 per second (audio leaving the device → segment at the device)', 'ms'),
    timeline.chart('sessions', 'Streaming sessions', 'sessions'),
    { title: 'CPU per process', yLabel: 'cores', lines: sampler.lines('cores') },
    { title: 'RSS of the server under test', yLabel: 'MiB', lines: sampler.lines('rssMiB', (n) => n === 'service' || n === 'bare') },
  ]).map((c) => ({ ...c, xDomain }));
}

/**
 * Where the service's memory is over time (measure.mjs memoryLines, every 5 s).
 * @param {import('./measure.mjs').Timeline} timeline
 */
export function memoryChart(timeline) {
  return timeline.chart('memory', "Where the service's memory is (every 5 s)", 'MiB');
}

/**
 * CPU per thread of the service's window and the baseline's: cores (µs per session-second) of the main thread, each
 * codec thread and the helpers together (measure.mjs observe()).
 * @param {any} w
 * @param {any} b
 * @param {number} sessions
 */
function threadRows(w, b, sessions) {
  const names = [...new Set([...w.threads, ...(b?.threads ?? [])].map((t) => t.thread))];
  const cell = (/** @type {any} */ x, /** @type {string} */ name) => {
    const t = x?.threads?.find((/** @type {any} */ y) => y.thread === name);
    return t ? `${v(t.cores)} (${v(Math.round((t.cores / sessions) * 1e6))})` : '-';
  };
  return { title: 'CPU per thread, cores (µs per session-second)', head: ['thread', 'service', 'bare uWS'], rows: names.map((n) => [n, cell(w, n), cell(b, n)]) };
}

/**
 * The service's CPU profiles (--profile; one file per thread: main, then codec shards) as tables: self time by area
 * for each thread, by function for the main thread.
 * @param {string | undefined} dir relative to the repository root
 */
export function profileTables(dir) {
  const abs = dir ? path.join(ROOT_DIR, dir) : '';
  const files = abs && existsSync(abs) ? readdirSync(abs).filter((f) => f.endsWith('.cpuprofile')).sort() : [];
  return files.flatMap((file, i) => {
    const p = summarize(path.join(abs, file));
    const thread = i === 0 ? 'main thread' : `thread ${file.split('.').at(-3)}`;
    const areas = { title: `service ${thread}: self time by area (${p.busyMs} ms busy of ${p.totalMs} ms; ${dir}/${file})`, head: ['self ms', '%', 'area'], rows: p.areas.map((a) => [String(a.selfMs), a.pct.toFixed(1), a.area]) };
    if (i > 0) return [areas];
    return [areas, { title: `service ${thread}: self time by function`, head: ['self ms', '%', 'function', 'where'], rows: p.functions.map((f) => [String(f.selfMs), f.pct.toFixed(1), f.name, f.where]) }];
  });
}

/** @param {number | null | undefined} value @param {number} max */
export const atMost = (value, max) => (typeof value === 'number' ? value <= max : null);

/**
 * A measured window's RSS level: the median of its per-second samples (results written before it existed: the last).
 * @param {{ rssMiB: number, rssMedianMiB?: number }} w
 */
export const steadyRssMiB = (w) => w.rssMedianMiB ?? w.rssMiB;

/**
 * Per session, in KiB, how much each part of the memory grew from the idle service to the end of the window.
 * @param {Record<string, number> | undefined} idle
 * @param {Record<string, number> | undefined} end
 * @param {number} sessions
 */
function memoryPerSession(idle, end, sessions) {
  if (!idle || !end) return '-';
  const d = (/** @type {string} */ k) => {
    const grew = (end[k] ?? NaN) - (idle[k] ?? NaN);
    return Number.isNaN(grew) ? '-' : v(kib(grew, sessions));
  };
  return `${d('heapUsed')} / ${d('heapTotal')}, ${d('codecHeapUsed')} / ${d('codecHeapTotal')}, ${d('external')}, ${d('mallocInUse')} / ${d('mallocFree')}`;
}

/**
 * With --speaker-id: which run this is, and in the second, what identification adds per session over the first.
 * @param {any} a
 * @param {any} w the window's figures
 * @param {number | null} rssPerSession
 */
function speakerIdRows(a, w, rssPerSession) {
  if (!a.speakerId) return [];
  const label = a.speakerId === 'on' ? 'on: every user has a speech profile' : 'off: no user has a speech profile';
  if (!a.speakerIdOff) return [['speaker identification', label, '-', '', '']];
  const off = a.speakerIdOff.service;
  const offRss = kib(steadyRssMiB(off.window) * 2 ** 20 - off.idleRss, a.speakerIdOff.options.sessions);
  const offCpu = off.window.serverCpuUsPerSessionS;
  return [
    ['speaker identification', label, '-', '', ''],
    ['  server CPU µs per session-second: on / off (added)', `${v(w.serverCpuUsPerSessionS)} / ${v(offCpu)} (${v(w.serverCpuUsPerSessionS - offCpu)})`, '-', v(ratio(w.serverCpuUsPerSessionS, offCpu)), ''],
    ['  RSS per streaming session, KiB: on / off (added)', `${v(rssPerSession)} / ${v(offRss)} (${v(rssPerSession !== null && offRss !== null ? rssPerSession - offRss : null)})`, '-', v(ratio(rssPerSession, offRss)), `off ≤ ${GOALS.rssPerSessionKiBMax}`],
  ];
}

/**
 * With --ack: which run this is; in the second, the ack latency and what acknowledged audio adds per session-second
 * over the first (CPU; the audio logs' bytes on disk). The goal: at most 15% more CPU per session-second.
 * @param {any} a
 * @param {any} w the window's figures
 */
function ackRows(a, w) {
  if (!a.ack) return [];
  if (!a.ackOff) return [['acknowledged audio', 'off: plain sessions', '-', '', '']];
  const offCpu = a.ackOff.service.window.serverCpuUsPerSessionS;
  return [
    ['acknowledged audio', 'on: every session ack=enabled', '-', '', ''],
    ['  ack latency p50 / p95 / p99 / max, ms (frame completing the offset sent → audio_ack received)', pct(w.ackLatency), '-', '', ''],
    ['  server CPU µs per session-second: on / off (added)', `${v(w.serverCpuUsPerSessionS)} / ${v(offCpu)} (${v(w.serverCpuUsPerSessionS - offCpu)})`, '-', v(ratio(w.serverCpuUsPerSessionS, offCpu)), 'on / off ≤ 1.15'],
    ['  audio log bytes on disk per session-second', v(a.figures.audioLogBytesPerSessionS), '-', '', ''],
  ];
}

/**
 * What the bare server does with each frame, as the baseline's description says it.
 * @param {Record<string, unknown>} options
 */
export const bareDoes = (options) =>
  options['bare-forward'] === true ? 'decodes each frame inline and sends the PCM on to a provider_a fake, 100 ms to a message' : 'only decodes each frame inline';

/** @param {any} a */
export function fleetResult(a) {
  const { figures: f, sessions } = a;
  const w = f.window;
  const b = f.bare;
  const d = f.drain;
  // The median of the window's per-second samples: a single one swings with the garbage collector and malloc_trim.
  const rssPerSession = kib(steadyRssMiB(w) * 2 ** 20 - f.idleRss, sessions);
  const rssPerSessionMax = kib((w.rssMaxMiB ?? w.rssMiB) * 2 ** 20 - f.idleRss, sessions);
  const rssPerIdle = kib(f.idleSessionsRss - f.idleRss, sessions);
  const cpuRatio = ratio(w.serverCpuUsPerSessionS, b?.serverCpuUsPerSessionS);
  // The idle service has its own timers (Redis, queues): at small N they weigh on the per-session figure.
  const beyondIdle = Math.round(((w.serverCores - f.idleCores) / sessions) * 1e6);
  const beyondIdleRatio = ratio(beyondIdle, b?.serverCpuUsPerSessionS);
  const summary = {
    head: ['figure', 'service', 'bare uWS (baseline)', 'service / bare', 'goal'],
    rows: [
      ['streaming sessions', v(sessions), b ? v(sessions) : '-', '', ''],
      ...(a.arriving
        ? [[`  of ${a.arriving} arriving at ${a.options['open-rate']}/s; refused with 1013 while arriving / in the window, at the window's end streaming`, `${v(f.arrivalRefused)} / ${v(w.refused)}, ${v(w.streamingAtEnd)}`, '-', '', '']]
        : []),
      ['frame latency p50 / p95 / p99 / max, ms', pct(w.lag), pct(b?.lag), v(ratio(w.lag.p99, b?.lag.p99)), `p99 < ${RAMP_P99_MS}`],
      ['segment latency p50 / p95 / p99 / max, ms', pct(w.segLatency), '-', '', ''],
      ['engine decode delay p50 / p99, event-loop delay p99, ms', engineDelayCell(w.engine), '-', '', ''],
      ['frames lost (sent − received after drain)', v(d.lostFrames), v(f.bareDrain?.lostFrames), '', '0'],
      ['  frames received twice (sent again after provider failures)', v(d.resentFrames), '-', '', ''],
      ['  frames kept for later transcription after provider failures (not lost)', v(d.keptFrames), '-', '', ''],
      ['server CPU µs per session-second', v(w.serverCpuUsPerSessionS), v(b?.serverCpuUsPerSessionS), v(cpuRatio), `≤ ${GOALS.cpuRatioMax}× bare`],
      ['  the same beyond the idle service’s own CPU', v(beyondIdle), v(b?.serverCpuUsPerSessionS), v(beyondIdleRatio), ''],
      ['server CPU, cores: idle / sessions ready / streaming', `${v(round3(f.idleCores))} / ${v(round3(f.idleSessionsCores))} / ${v(w.serverCores)}`, `- / - / ${v(b?.serverCores)}`, v(ratio(w.serverCores, b?.serverCores)), ''],
      ['server RSS idle / with the sessions (median, max), MiB', `${v(Math.round(f.idleRss / 2 ** 20))} / ${v(steadyRssMiB(w))}, ${v(w.rssMaxMiB)}`, b ? `- / ${v(steadyRssMiB(b))}, ${v(b.rssMaxMiB)}` : '-', '', ''],
      ['RSS per idle session, KiB', v(rssPerIdle), '-', '', ''],
      ['  of it: JS heap used / committed (main thread, codec threads), external, malloc in use / free, KiB', memoryPerSession(f.idleMem, f.idleSessionsMem, sessions), '-', '', ''],
      ['RSS per streaming session beyond idle (median, max), KiB', `${v(rssPerSession)}, ${v(rssPerSessionMax)}`, '-', '', `≤ ${GOALS.rssPerSessionKiBMax}`],
      ['  of it: JS heap used / committed (main thread, codec threads), external, malloc in use / free, KiB (at the window\'s end)', memoryPerSession(f.idleMem, f.windowMem, sessions), '-', '', ''],
      ['generator CPU, cores (µs per session-second)', `${v(w.generatorCores)} (${v(w.generatorCpuUsPerSessionS)})`, b ? `${v(b.generatorCores)} (${v(b.generatorCpuUsPerSessionS)})` : '-', '', ''],
      [`${f.stt === 'provider_b' ? 'provider_b' : 'provider_a'} fake CPU, cores (a stand-in for a remote service, on the same cores)`, v(w.fakeCores), '-', '', ''],
      ['PCM per message at the provider (bare: per decoded frame), mean ms', v(w.messageMs), v(b?.messageMs), '', ''],
      ['generator lateness p50 / p95 / p99 / max, ms', pct(w.lateness), pct(b?.lateness), '', ''],
      ...(f.webhook
        ? [[`${f.webhook.type} webhook in the window: requests / KiB / segments (users reached)`, `${v(f.webhook.requests)} / ${v(Math.round(f.webhook.bytes / 1024))} / ${v(f.webhook.segments)} (${v(f.webhook.users)})`, '-', '', '']]
        : []),
      ...speakerIdRows(a, w, rssPerSession),
      ...ackRows(a, w),
      ['sessions closed early', v(w.unexpectedCloses), v(b?.unexpectedCloses), '', '0'],
    ],
  };
  const goals = [
    { name: 'frames lost', target: '= 0', value: d.lostFrames, met: d.lostFrames === null ? null : d.lostFrames === 0 },
    { name: 'engine CPU per session-second vs bare', target: `≤ ${GOALS.cpuRatioMax}×`, value: cpuRatio, met: atMost(cpuRatio, GOALS.cpuRatioMax) },
    { name: 'RSS per streaming session beyond idle', target: `≤ ${GOALS.rssPerSessionKiBMax} KiB`, value: rssPerSession, met: atMost(rssPerSession, GOALS.rssPerSessionKiBMax) },
    { name: 'fleet capacity (needs --ramp)', target: `≥ ${GOALS.capacityShareOfLimit * 100}% of limit and ≥ ${GOALS.minCapacity}`, value: null, met: null },
  ];
  const notes = [
    f.note,
    `stt: ${f.stt === 'provider_a' || f.stt === 'provider_b' ? `the ${f.stt} fake, a separate process` : f.stt === 'custom' ? 'none (custom_stt=enabled; devices send suggested_transcript every 2 s)' : 'the service’s default engine'}`,
    LATENCY_NOTE,
    Number(a.options['pause-every'] ?? 0) > 0 ? 'devices paused (--pause-every): the frame latency counts each pause as delay, since it is measured against the audio clock; the segment latency and the loss count are not affected' : undefined,
    SEGMENT_NOTE,
    ENGINE_DELAY_NOTE,
    `the generator (${w.generatorCores} cores for ${sessions} devices) runs on the same machine as the server: its CPU is not the server’s but competes for the same cores`,
    w.lag.exact === false ? 'whole-window latency percentiles are estimated from the 2 s windows’ p50/p95/p99/max (the provider fake sends percentiles, not histograms)' : undefined,
    a.profileDir ? `CPU profile of the service: ${a.profileDir}` : undefined,
  ].filter(Boolean);
  const result = {
    scenario: 'fleet',
    version: 2,
    startedAt: new Date(Date.now() - a.timeline.now() * 1000).toISOString(),
    machine: a.m,
    options: { sessions, seconds: a.seconds, codec: a.codec, stt: f.stt, baselineSeconds: a.baselineSeconds, raw: a.options },
    audio: { codec: a.codec, sampleRate: a.fixture.sampleRate, frameMs: a.fixture.frameMs, loopSeconds: a.fixture.seconds, what: a.fixture.what },
    baseline: `a bare uWebSockets.js server that ${bareDoes(a.options)} (bench/listen/bare-listen.mjs), same generator, same ${sessions} sessions, ${a.baselineSeconds} s`,
    summary,
    tables: [...(w.threads ? [threadRows(w, b, sessions)] : []), ...profileTables(a.profileDir)],
    figures: figuresOf({
      'frame latency p99 ms': [w.lag.p99, 'ms', 'lower'],
      'frame latency p50 ms': [w.lag.p50, 'ms', 'lower'],
      'segment latency p95 ms': [w.segLatency.p95, 'ms', 'lower'],
      'server CPU µs per session-s': [w.serverCpuUsPerSessionS, 'µs', 'lower'],
      'CPU ratio to bare': [cpuRatio, '', 'lower'],
      'server CPU µs per session-s beyond idle': [beyondIdle, 'µs', 'lower'],
      'RSS per streaming session KiB': [rssPerSession, 'KiB', 'lower'],
      'RSS per idle session KiB': [rssPerIdle, 'KiB', 'lower'],
      'frames lost': [d.lostFrames, 'frames', 'lower'],
      'generator µs per session-s': [w.generatorCpuUsPerSessionS, 'µs', 'lower'],
    }),
    goals,
    notes,
    charts: charts(a.timeline, a.sampler),
    service: { ...f, exitCode: a.exitCode },
  };
  finish(/** @type {any} */ (result), a.options);
  if (w.unexpectedCloses > 0) throw new Error(`${w.unexpectedCloses} sessions were closed by the server while streaming: see the result file`);
  if (a.exitCode !== 0) throw new Error(`the service exited with ${a.exitCode} on SIGTERM`);
  return result;
}
