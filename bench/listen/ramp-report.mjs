// Turns a capacity ramp (fleet --ramp, limit) into the common result: capacities, the steps of each target, goals, charts.
import { figuresOf, finish } from '../lib/report.mjs';
import { RAMP_P99_MS } from './measure.mjs';
import { ENGINE_DELAY_NOTE, GOALS, LATENCY_NOTE, atMost, charts, engineDelayCell, kib, pct, profileTables, ratio, steadyRssMiB, v } from './fleet-report.mjs';

/**
 * Steps of a ramp as table rows.
 * @param {any[]} steps
 */
const stepRows = (steps) => steps.map((s) => [v(s.sessions), s.pass ? 'pass' : s.heldAgain ? `over, held again: ${s.why ?? ''}` : `FAIL: ${s.why ?? ''}`, pct(s.lag), v(s.serverCores), v(s.serverCpuUsPerSessionS), v(s.generatorCores), v(s.fakeCores), v(s.lateness?.p99), engineDelayCell(s.engine), v(steadyRssMiB(s)), v(s.unexpectedCloses), v(s.behindMsPerSession)]);
const STEP_HEAD = ['sessions', '', 'latency p50/p95/p99/max ms', 'server cores', 'server µs/session-s', 'generator cores', 'provider fake cores', 'generator late p99 ms', 'engine decode p50/p99, loop p99 ms', 'RSS MiB (median)', 'closed early', 'behind ms/session'];

/** How the two searches shared the run, by --ramp order. */
const ORDER_NOTES = /** @type {Record<string, string>} */ ({
  interleaved: 'the two searches took turns step by step (the order alternating each round), each target\'s sessions closed while the other stepped, so both met the same state of the host',
  'bare-first': 'the bare server was ramped first, then the service (--sequential)',
  'service-first': 'the service was ramped first, then the bare server (--service-first)',
});

/**
 * A search's passing steps by their number of sessions.
 * @param {{ steps: any[] }} search
 * @returns {Map<number, any>}
 */
const passedSteps = (search) => new Map(search.steps.filter((s) => s.pass).map((s) => [s.sessions, s]));

/**
 * The two passing steps whose CPU per session the ramp compares: at one N, the largest both passed; else the service's
 * capacity step against the bare server's smallest passing step at or above it (the bare server's cost per session
 * falls as N grows, so this flatters it a little, never the service); else the two capacities' steps.
 * @param {{ capacity: number, steps: any[] }} fleet
 * @param {{ capacity: number, steps: any[] }} limit
 * @returns {{ svc: any, bare: any }}
 */
export function cpuComparison(fleet, limit) {
  const fp = passedSteps(fleet);
  const lp = passedSteps(limit);
  const common = Math.max(0, ...[...fp.keys()].filter((n) => lp.has(n)));
  if (common > 0) return { svc: fp.get(common), bare: lp.get(common) };
  const above = Math.min(...[...lp.keys()].filter((n) => n >= fleet.capacity));
  return { svc: fp.get(fleet.capacity), bare: lp.get(Number.isFinite(above) ? above : limit.capacity) };
}

/** @param {any} a */
export function rampResult(a) {
  const { limit, fleet } = a;
  const lp = passedSteps(limit);
  const fp = passedSteps(fleet);
  const at = cpuComparison(fleet, limit);
  const cpuAt = at.svc && at.bare ? (at.svc.sessions === at.bare.sessions ? String(at.svc.sessions) : `service at ${at.svc.sessions}, bare at ${at.bare.sessions}`) : 'capacity';
  const cpuRatio = ratio(at.svc?.serverCpuUsPerSessionS, at.bare?.serverCpuUsPerSessionS);
  const share = ratio(fleet.capacity, limit.capacity);
  const top = fp.get(fleet.capacity);
  // RSS per session from the last passing step of the way up: later (smaller) steps keep the high-water mark of the
  // failed one, as a heap does not give memory back at once.
  // (A step held again is one measurement of a step that comes next in the list: neither passing nor the first failure.)
  const firstFail = fleet.steps.findIndex((/** @type {any} */ x) => !x.pass && !x.heldAgain);
  const up = (firstFail < 0 ? fleet.steps : fleet.steps.slice(0, firstFail)).filter((/** @type {any} */ x) => x.pass).at(-1) ?? top;
  const rssPerSession = up ? kib(steadyRssMiB(up) * 2 ** 20 - a.idleRss, up.sessions) : null;
  const summary = {
    head: ['figure', 'service', 'bare uWS (limit)', 'service / bare', 'goal'],
    rows: [
      ['capacity, sessions (largest passing step)', v(fleet.capacity), v(limit.capacity), v(share), `≥ ${GOALS.capacityShareOfLimit} and ≥ ${GOALS.minCapacity}`],
      ['first failing step', v(fleet.firstFail), v(limit.firstFail), '', ''],
      ['frame latency at capacity p50/p95/p99/max, ms', pct(top?.lag), pct(lp.get(limit.capacity)?.lag), '', `p99 < ${RAMP_P99_MS}`],
      [`server CPU µs per session-second (at ${cpuAt})`, v(at.svc?.serverCpuUsPerSessionS), v(at.bare?.serverCpuUsPerSessionS), v(cpuRatio), `≤ ${GOALS.cpuRatioMax}×`],
      ['generator CPU at capacity, cores', v(top?.generatorCores), v(lp.get(limit.capacity)?.generatorCores), '', ''],
      [`${a.stt === 'provider_b' ? 'provider_b' : 'provider_a'} fake CPU at capacity, cores (the same box)`, v(top?.fakeCores), '-', '', ''],
      [`RSS per streaming session beyond idle (at ${up?.sessions ?? '-'}${up === top ? '' : ', the last pass before a failure'}), KiB`, v(rssPerSession), '-', '', `≤ ${GOALS.rssPerSessionKiBMax}`],
      ['frames lost over the whole ramp (failing steps included)', v(a.svcDrain.lostFrames), v(a.bareDrain.lostFrames), '', ''],
      ['  of the service: frames kept for later transcription after provider failures (not lost)', v(a.svcDrain.keptFrames), '-', '', ''],
    ],
  };
  if (fleet.steps.length === 0) {
    // limit alone: only the bare server's column.
    summary.head = ['figure', 'bare uWS', 'note'];
    summary.rows = summary.rows.filter((r) => !/RSS per streaming/.test(r[0] ?? '')).map((r) => [r[0] ?? '', r[2] ?? '', /capacity, sessions/.test(r[0] ?? '') ? 'reference: ~1,300–1,400 on the reference box' : '']);
  }
  const goals = [
    { name: 'fleet capacity vs limit', target: `≥ ${GOALS.capacityShareOfLimit * 100}%`, value: share, met: share === null ? null : share >= GOALS.capacityShareOfLimit },
    { name: 'fleet capacity', target: `≥ ${GOALS.minCapacity} sessions`, value: fleet.capacity, met: fleet.capacity >= GOALS.minCapacity },
    { name: 'engine CPU per session-second vs bare', target: `≤ ${GOALS.cpuRatioMax}×`, value: cpuRatio, met: atMost(cpuRatio, GOALS.cpuRatioMax) },
    { name: 'RSS per streaming session beyond idle', target: `≤ ${GOALS.rssPerSessionKiBMax} KiB`, value: rssPerSession, met: atMost(rssPerSession, GOALS.rssPerSessionKiBMax) },
  ];
  const result = {
    scenario: a.scenario ?? 'fleet',
    version: 2,
    startedAt: new Date(Date.now() - a.timeline.now() * 1000).toISOString(),
    machine: a.m,
    options: { ramp: true, order: a.order, codec: a.codec, stt: a.stt, raw: a.options },
    audio: { codec: a.codec, sampleRate: a.fixture.sampleRate, frameMs: a.fixture.frameMs, loopSeconds: a.fixture.seconds, what: a.fixture.what },
    baseline: 'the limit: a bare uWebSockets.js server that only decodes each frame inline (bench/listen/bare-listen.mjs), ramped with the same generator in the same run',
    summary,
    tables: [
      { title: 'limit (bare uWS) steps', head: STEP_HEAD, rows: stepRows(limit.steps) },
      ...(fleet.steps.length ? [{ title: 'service steps', head: STEP_HEAD, rows: stepRows(fleet.steps) }] : []),
      ...profileTables(a.profileDir),
    ],
    figures: figuresOf({
      'fleet capacity': [fleet.steps.length ? fleet.capacity : null, 'sessions', 'higher'],
      'limit capacity': [limit.capacity, 'sessions', 'higher'],
      'capacity share of limit': [share, '', 'higher'],
      'CPU ratio to bare': [cpuRatio, '', 'lower'],
      'RSS per streaming session KiB': [rssPerSession, 'KiB', 'lower'],
    }),
    goals: fleet.steps.length ? goals : [],
    notes: [a.note, ORDER_NOTES[a.order], LATENCY_NOTE, ENGINE_DELAY_NOTE, `a step passes when p99 frame latency < ${RAMP_P99_MS} ms for its whole hold, no session is closed, and less than 250 ms of audio per session is still on its way`, 'generator CPU is in the step tables: it shares the machine with the server'].filter(Boolean),
    charts: charts(a.timeline, a.sampler),
    limit,
    fleet,
    drains: { service: a.svcDrain, bare: a.bareDrain },
    serviceExitCode: a.exitCode,
  };
  finish(/** @type {any} */ (result), a.options);
  return result;
}
