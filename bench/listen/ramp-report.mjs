// Turns a capacity ramp (fleet --ramp, limit) into the common result: capacities, the steps of each target, goals, charts.
import { figuresOf, finish } from '../lib/report.mjs';
import { RAMP_BACKLOG_MS, RAMP_LATE_MS, RAMP_P99_MS, RAMP_RECEIVED_MIN } from './measure.mjs';
import { ENGINE_DELAY_NOTE, GOALS, LATENCY_NOTE, atMost, bareDoes, charts, engineDelayCell, kib, pct, profileTables, ratio, steadyRssMiB, v } from './fleet-report.mjs';

/**
 * Steps of a ramp as table rows.
 * @param {any[]} steps
 */
const stepRows = (steps) => steps.map((s) => [v(s.sessions), s.pass ? 'pass' : s.heldAgain ? `over, held again: ${s.why ?? ''}` : `FAIL: ${s.why ?? ''}`, pct(s.lag), share(s.receivedShare), v(s.serverCores), v(s.serverCpuUsPerSessionS), `${v(s.generatorCores)} (${v(s.generators)}; ${v(s.busiestGeneratorCores)})`, v(s.fakeCores), v(s.lateness?.p99), v(s.backlogMaxMs), engineDelayCell(s.engine), v(s.engine?.gcS), v(steadyRssMiB(s)), v(s.unexpectedCloses)]);
const STEP_HEAD = ['sessions', '', 'receiving-end lag p50/p95/p99/max ms', 'audio arrived', 'server cores', 'server µs/session-s', 'generator cores (processes; busiest)', 'provider fake cores', 'generator late p99 ms', 'largest device backlog ms', 'engine decode p50/p99, loop p99 ms', 'main-thread GC s', 'RSS MiB (median)', 'closed early'];

/** A share as a percentage with one decimal. */
const share = (/** @type {number | null | undefined} */ x) => (typeof x === 'number' ? `${Math.round(x * 1000) / 10}%` : '-');

/** Sessions at which the per-thread table is read on the way up, besides capacity (fleet --ramp passes through it). */
export const THREAD_PROBE = 800;

/**
 * Per-thread CPU of the steps that show where a server's time goes: the passing step nearest THREAD_PROBE sessions,
 * and the one at capacity, of each side; a row per thread, in cores and µs per session-second.
 * @param {{ capacity: number, steps: any[] }} fleet
 * @param {{ capacity: number, steps: any[] }} limit
 */
export function threadTable(fleet, limit) {
  /** @type {{ label: string, step: any }[]} */
  const cols = [];
  for (const [name, search] of /** @type {const} */ ([['service', fleet], ['bare', limit]])) {
    const passed = search.steps.filter((s) => s.pass && s.threads);
    if (passed.length === 0) continue;
    const near = passed.reduce((a, b) => (Math.abs(b.sessions - THREAD_PROBE) < Math.abs(a.sessions - THREAD_PROBE) ? b : a));
    const top = passed.find((s) => s.sessions === search.capacity) ?? passed.at(-1);
    cols.push({ label: `${name} at ${near.sessions}`, step: near });
    if (top !== near) cols.push({ label: `${name} at ${top.sessions} (capacity)`, step: top });
  }
  const names = [...new Set(cols.flatMap((c) => c.step.threads.map((/** @type {any} */ t) => t.thread)))];
  const rows = names.map((thread) => [
    thread,
    ...cols.map(({ step }) => {
      const t = step.threads.find((/** @type {any} */ x) => x.thread === thread);
      return t ? `${v(t.cores)} (${v(Math.round((t.cores / step.sessions) * 1e6))})` : '-';
    }),
  ]);
  rows.push(['  of the main thread: garbage collection, s per s', ...cols.map(({ step }) => (step.engine?.gcS != null ? v(Math.round((step.engine.gcS / step.wallS) * 1000) / 1000) : '-'))]);
  rows.push(['  event-loop delay p99, ms', ...cols.map(({ step }) => v(step.engine?.loopLagP99Ms))]);
  rows.push(['  PCM per message to the receiving end, ms', ...cols.map(({ step }) => v(step.messageMs))]);
  return { title: 'CPU per thread, cores (µs per session-second)', head: ['thread', ...cols.map((c) => c.label)], rows };
}

/** How the two searches shared the run, by --ramp order. */
const ORDER_NOTES = /** @type {Record<string, string>} */ ({
  interleaved: 'the two searches took turns step by step (the order alternating each round), each target\'s sessions closed while the other stepped, so both met the same state of the host',
  'bare-first': 'the bare server was ramped first, then the service (--sequential)',
  'service-first': 'the service was ramped first, then the bare server (--service-first)',
});

const ROUNDS_NOTE =
  "--rounds: the service and the bare server took turns at one N (the order alternating each round), each target's sessions closed while the other ran; a round over the p99 line with nothing closed or piling up is held once more, and its first window is left out of the medians";

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

/**
 * @param {number[]} xs
 * @returns {number | null}
 */
const median = (xs) => {
  if (xs.length === 0) return null;
  const o = [...xs].sort((a, b) => a - b);
  const m = o.length >> 1;
  return o.length % 2 ? /** @type {number} */ (o[m]) : (/** @type {number} */ (o[m - 1]) + /** @type {number} */ (o[m])) / 2;
};

/**
 * `fleet --rounds`: one measured step per round on each side (a step held again is left out: the step after it is the
 * round's), the i-th of the service's and the i-th of the bare server's next to each other in time. CPU per
 * session-second as each side's median over its rounds, the ratio of the medians, and each round's own ratio.
 * @param {{ steps: any[] }} fleet
 * @param {{ steps: any[] }} limit
 * @param {number} idleRss the idle service's RSS, bytes
 */
export function roundsComparison(fleet, limit, idleRss) {
  const svc = fleet.steps.filter((s) => !s.heldAgain);
  const bare = limit.steps.filter((s) => !s.heldAgain);
  /** @param {number[]} xs */
  const spread = (xs) => ({ median: median(xs), min: xs.length ? Math.min(...xs) : null, max: xs.length ? Math.max(...xs) : null });
  const cpu = (/** @type {any[]} */ steps) => steps.map((s) => s.serverCpuUsPerSessionS).filter((x) => typeof x === 'number' && Number.isFinite(x));
  const rss = svc.map((s) => kib(steadyRssMiB(s) * 2 ** 20 - idleRss, s.sessions)).filter((x) => x !== null);
  const svcCpu = spread(cpu(svc));
  const bareCpu = spread(cpu(bare));
  return {
    svc: svcCpu,
    bare: bareCpu,
    ratio: ratio(svcCpu.median, bareCpu.median),
    perRound: svc.map((s, i) => ratio(s.serverCpuUsPerSessionS, bare[i]?.serverCpuUsPerSessionS)),
    rssPerSession: median(/** @type {number[]} */ (rss)),
    passed: { svc: svc.filter((s) => s.pass).length, bare: bare.filter((s) => s.pass).length, rounds: Math.max(svc.length, bare.length) },
    p99: { svc: svc.map((s) => s.lag?.p99 ?? null), bare: bare.map((s) => s.lag?.p99 ?? null) },
    rssMiB: { idle: idleRss / 2 ** 20, svc: svc.map((s) => steadyRssMiB(s) ?? null), bare: bare.map((s) => steadyRssMiB(s) ?? null) },
  };
}

/** `median (min-max)` of a spread. */
const spreadCell = (/** @type {{ median: number | null, min: number | null, max: number | null }} */ x) => (x.median === null ? '-' : `${Math.round(x.median)} (${v(x.min)}-${v(x.max)})`);

/**
 * The summary and goals of `fleet --rounds` (no capacity: one N throughout).
 * @param {any} a
 */
function roundsSummary(a) {
  const { fleet, limit } = a;
  const r = roundsComparison(fleet, limit, a.idleRss);
  const med = (/** @type {any[]} */ steps, /** @type {string} */ k) => median(steps.filter((s) => !s.heldAgain).map((s) => s[k]).filter((x) => typeof x === 'number'));
  const n = fleet.steps[0]?.sessions ?? limit.steps[0]?.sessions;
  const summary = {
    head: ['figure', 'service', 'bare uWS (baseline)', 'service / bare', 'goal'],
    rows: [
      [`sessions, ${a.rounds} rounds on each side in turn`, v(n), v(n), '', ''],
      [`rounds passed (p99 < ${RAMP_P99_MS} ms, nothing closed or piling up)`, `${r.passed.svc} of ${r.passed.rounds}`, `${r.passed.bare} of ${r.passed.rounds}`, '', ''],
      ['frame latency p99 by round, ms', r.p99.svc.map(v).join(', '), r.p99.bare.map(v).join(', '), '', `< ${RAMP_P99_MS}`],
      ['server CPU µs per session-second, median (min-max)', spreadCell(r.svc), spreadCell(r.bare), v(r.ratio), `≤ ${GOALS.cpuRatioMax}×`],
      ["  each round's ratio (the service's round against the bare server's next to it)", '', '', r.perRound.map(v).join(', '), ''],
      ['generator CPU, cores (median)', v(med(fleet.steps, 'generatorCores')), v(med(limit.steps, 'generatorCores')), '', ''],
      [`${a.stt === 'provider_b' ? 'provider_b' : 'provider_a'} fake CPU, cores (median; the same box)`, v(med(fleet.steps, 'fakeCores')), '-', '', ''],
      ['server RSS idle; with the sessions by round (median), MiB', `${v(Math.round(r.rssMiB.idle * 10) / 10)}; ${r.rssMiB.svc.map(v).join(', ')}`, `-; ${r.rssMiB.bare.map(v).join(', ')}`, '', ''],
      ['RSS per streaming session beyond idle (median of the rounds), KiB', v(r.rssPerSession), '-', '', `≤ ${GOALS.rssPerSessionKiBMax}`],
      ['frames lost over all rounds', v(a.svcDrain.lostFrames), v(a.bareDrain.lostFrames), '', '0'],
      ['  of the service: frames received twice (sent again after provider failures)', v(a.svcDrain.resentFrames), '-', '', ''],
      ['  of the service: frames kept for later transcription after provider failures (not lost)', v(a.svcDrain.keptFrames), '-', '', ''],
    ],
  };
  const goals = [
    { name: 'engine CPU per session-second vs bare (median of the rounds)', target: `≤ ${GOALS.cpuRatioMax}×`, value: r.ratio, met: atMost(r.ratio, GOALS.cpuRatioMax) },
    { name: 'RSS per streaming session beyond idle', target: `≤ ${GOALS.rssPerSessionKiBMax} KiB`, value: r.rssPerSession, met: atMost(r.rssPerSession, GOALS.rssPerSessionKiBMax) },
    { name: 'frames lost', target: '0', value: a.svcDrain.lostFrames, met: a.svcDrain.lostFrames === 0 },
  ];
  const figures = figuresOf({
    'CPU ratio to bare': [r.ratio, '', 'lower'],
    'service CPU us per session-second': [r.svc.median, 'µs', 'lower'],
    'bare CPU us per session-second': [r.bare.median, 'µs', 'lower'],
    'RSS per streaming session KiB': [r.rssPerSession, 'KiB', 'lower'],
  });
  return { summary, goals, figures, rounds: r };
}

/**
 * The cores every process of a step used (server under test, generator, provider fake): near the machine's count, the
 * capacity found is the box's, not the server's alone.
 * @param {any} step
 */
const boxCores = (step) => (step ? Math.round(((step.serverCores ?? 0) + (step.generatorCores ?? 0) + (step.fakeCores ?? 0)) * 1000) / 1000 : null);

/**
 * Why the smallest failing step of a search failed ('-' when none failed).
 * @param {{ firstFail: number | null, steps: any[] }} search
 */
const firstWhy = (search) => search.steps.filter((s) => !s.pass && !s.heldAgain && s.sessions === search.firstFail).at(-1)?.why ?? '-';

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
      ['  why it failed', firstWhy(fleet), firstWhy(limit), '', 'the server, not the generator'],
      ['frame latency at capacity p50/p95/p99/max, ms', pct(top?.lag), pct(lp.get(limit.capacity)?.lag), '', `p99 < ${RAMP_P99_MS}`],
      [`server CPU µs per session-second (at ${cpuAt})`, v(at.svc?.serverCpuUsPerSessionS), v(at.bare?.serverCpuUsPerSessionS), v(cpuRatio), `≤ ${GOALS.cpuRatioMax}×`],
      ['generator CPU at capacity, cores', v(top?.generatorCores), v(lp.get(limit.capacity)?.generatorCores), '', ''],
      [`${a.stt === 'provider_b' ? 'provider_b' : 'provider_a'} fake CPU at capacity, cores (the same box)`, v(top?.fakeCores), '-', '', ''],
      [`the box at capacity: server + generator + fake, cores of ${a.m?.cpus ?? '?'}`, v(boxCores(top)), v(boxCores(lp.get(limit.capacity))), '', ''],
      [`RSS per streaming session beyond idle (at ${up?.sessions ?? '-'}${up === top ? '' : ', the last pass before a failure'}), KiB`, v(rssPerSession), '-', '', `≤ ${GOALS.rssPerSessionKiBMax}`],
      ['frames lost over the whole ramp (failing steps included)', v(a.svcDrain.lostFrames), v(a.bareDrain.lostFrames), '', ''],
      ['  of the service: frames received twice (sent again after provider failures)', v(a.svcDrain.resentFrames), '-', '', ''],
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
  const byRounds = a.rounds === undefined ? undefined : roundsSummary(a);
  const result = {
    scenario: a.scenario ?? 'fleet',
    version: 2,
    startedAt: new Date(Date.now() - a.timeline.now() * 1000).toISOString(),
    machine: a.m,
    options: { ramp: a.rounds === undefined, ...(a.rounds === undefined ? {} : { rounds: a.rounds }), order: a.order, codec: a.codec, stt: a.stt, raw: a.options },
    audio: { codec: a.codec, sampleRate: a.fixture.sampleRate, frameMs: a.fixture.frameMs, loopSeconds: a.fixture.seconds, what: a.fixture.what },
    baseline: byRounds
      ? `a bare uWebSockets.js server that ${bareDoes(a.options)} (bench/listen/bare-listen.mjs), the same sessions with the same generator, in turn with the service`
      : `the limit: a bare uWebSockets.js server that ${bareDoes(a.options)} (bench/listen/bare-listen.mjs), ramped with the same generator in the same run`,
    summary: byRounds?.summary ?? summary,
    tables: [
      { title: byRounds ? 'bare uWS rounds' : 'limit (bare uWS) steps', head: STEP_HEAD, rows: stepRows(limit.steps) },
      ...(fleet.steps.length ? [{ title: byRounds ? 'service rounds' : 'service steps', head: STEP_HEAD, rows: stepRows(fleet.steps) }] : []),
      threadTable(fleet, limit),
      ...profileTables(a.profileDir),
    ],
    figures: byRounds?.figures ?? figuresOf({
      'fleet capacity': [fleet.steps.length ? fleet.capacity : null, 'sessions', 'higher'],
      'limit capacity': [limit.capacity, 'sessions', 'higher'],
      'capacity share of limit': [share, '', 'higher'],
      'CPU ratio to bare': [cpuRatio, '', 'lower'],
      'RSS per streaming session KiB': [rssPerSession, 'KiB', 'lower'],
    }),
    goals: byRounds?.goals ?? (fleet.steps.length ? goals : []),
    ...(byRounds ? { rounds: byRounds.rounds } : {}),
    notes: [a.note, byRounds ? ROUNDS_NOTE : ORDER_NOTES[a.order], LATENCY_NOTE, ENGINE_DELAY_NOTE, `a step passes, on either side, when for its whole hold every session streams and none is closed, the receiving end's lag p99 (PCM out of the bare server; PCM into the provider fake behind the service) < ${RAMP_P99_MS} ms, at least ${RAMP_RECEIVED_MIN * 100}% of the audio sent arrives there, no device has more than ${RAMP_BACKLOG_MS} ms of audio unsent, and the generator's lateness p99 ≤ ${RAMP_LATE_MS} ms (past it the step measures the generator: add --generators)`, 'generator CPU is in the step tables: it shares the machine with the server'].filter(Boolean),
    charts: charts(a.timeline, a.sampler),
    limit,
    fleet,
    drains: { service: a.svcDrain, bare: a.bareDrain },
    serviceExitCode: a.exitCode,
  };
  finish(/** @type {any} */ (result), a.options);
  return result;
}
