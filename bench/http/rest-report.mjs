// Turns the rest bench's measurements into the common result: table, ratio to bare uWS, goal, bar charts, profile tables.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { summarize } from '../lib/cpuprofile.mjs';
import { BENCH_DIR, figuresOf } from '../lib/report.mjs';

/** Throughput of the authenticated GET as a share of bare uWS that this bench aims for. */
export const GOAL_GET_RATIO = 0.25;

/**
 * @param {{ m: import('../lib/report.mjs').Machine, options: { seconds: number, warmup: number, connections: number, pipelining: number, targets: string[], profile: boolean, smoke: boolean }, results: Record<string, import('./rest.mjs').Target>, profileDir: string | undefined, serviceExit: number | null }} a
 */
export function restResult({ m, options, results, profileDir, serviceExit }) {
  const bare = results.bare;
  /** @type {Record<string, number | null>} */
  const ratios = {};
  for (const t of Object.values(results)) if (t.name !== 'bare') ratios[t.name] = bare ? Math.round((t.requestsPerSec / bare.requestsPerSec) * 1000) / 1000 : null;
  const getRatio = ratios.get ?? null;
  /** @type {ReturnType<typeof summarize> | undefined} */
  let prof;
  if (profileDir) {
    const files = readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
    if (files[0]) prof = summarize(path.join(profileDir, files[0]));
  }

  const rows = Object.values(results);
  const result = {
    scenario: 'rest',
    version: 2,
    startedAt: new Date().toISOString(),
    machine: m,
    options,
    baseline: `bare: a bare uWebSockets.js server, one route, constant JSON of the same bytes as GET; ${options.connections} keep-alive connections (bench/http/load.mjs), pipelining ${options.pipelining}, ${options.seconds} s per target after ${options.warmup} s warm-up`,
    summary: {
      head: ['target', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'ratio to bare', 'what'],
      rows: rows.map((t) => [
        `${t.name} ${t.method} ${t.name === 'bare' ? '(bare)' : t.path}`,
        String(t.requestsPerSec),
        String(t.p50Ms),
        String(t.p99Ms),
        String(t.non2xx + t.errors + t.timeouts),
        t.name === 'bare' ? '1' : ratios[t.name] === null ? 'n/a' : (ratios[t.name] ?? 0).toFixed(3),
        t.what,
      ]),
    },
    figures: figuresOf(
      Object.fromEntries([
        ...rows.flatMap((t) => [
          [`${t.name} req/s`, [t.requestsPerSec, 'req/s', 'higher']],
          [`${t.name} p50 ms`, [t.p50Ms, 'ms', 'lower']],
          [`${t.name} p99 ms`, [t.p99Ms, 'ms', 'lower']],
        ]),
        ...Object.entries(ratios).map(([n, r]) => [`${n} / bare`, [r, '', 'higher']]),
      ]),
    ),
    goals: [{ name: 'GET throughput vs bare uWS', target: `≥ ${GOAL_GET_RATIO}`, value: getRatio, met: getRatio === null ? null : getRatio >= GOAL_GET_RATIO }],
    notes: prof ? [`profile of the service: ${prof.busyMs} ms busy of ${prof.totalMs} ms (${path.relative(BENCH_DIR, profileDir ?? '')})`] : [],
    tables: prof
      ? [
          { title: 'service profile by area', head: ['self ms', '%', 'area'], rows: prof.areas.map((a) => [String(a.selfMs), a.pct.toFixed(1), a.area]) },
          { title: 'service profile by function', head: ['self ms', '%', 'function', 'where'], rows: prof.functions.map((f) => [String(f.selfMs), f.pct.toFixed(1), f.name, f.where]) },
        ]
      : [],
    charts: [
      { kind: 'bar', title: 'Throughput', yLabel: 'requests per second', categories: rows.map((t) => t.name), series: [{ name: 'req/s', values: rows.map((t) => t.requestsPerSec) }] },
      { kind: 'bar', title: 'Latency', yLabel: 'ms', categories: rows.map((t) => t.name), series: [{ name: 'p50', values: rows.map((t) => t.p50Ms) }, { name: 'p99', values: rows.map((t) => t.p99Ms) }] },
    ],
    targets: results,
    ratios,
    goal: { target: 'get', minRatio: GOAL_GET_RATIO, ratio: getRatio, met: getRatio === null ? null : getRatio >= GOAL_GET_RATIO },
    serviceExitCode: serviceExit,
    ...(prof ? { profile: { dir: path.relative(BENCH_DIR, profileDir ?? ''), ...prof } } : {}),
  };
  return result;
}
