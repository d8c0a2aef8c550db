// What every bench prints and writes: the machine, the baseline, the figures and their ratio to it (so runs compare),
// as a table on stdout, bench/results/<timestamp>-<scenario>.json and an HTML report with charts next to it.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, hostname, release } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { calibrationText } from './calibrate.mjs';
import { renderHtml } from './html.mjs';

/** bench/ */
export const BENCH_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
/** The repository root (bench/..). */
export const ROOT_DIR = path.dirname(BENCH_DIR);
export const RESULTS_DIR = path.join(BENCH_DIR, 'results');

/**
 * @typedef {object} Machine
 * @property {string} host
 * @property {number} cpus
 * @property {string} cpuModel
 * @property {number} memoryGiB
 * @property {string} node
 * @property {string} os
 * @property {number[]} loadavg 1, 5 and 15 minute load averages when the bench started (a busy box makes figures noisy).
 * @property {{ steal: number, total: number } | null} [cpuAtStart] the machine's CPU ticks when the bench started (Linux)
 * @property {{ syscallUs: number, loopbackMessageUs: number, threadRoundTripUs?: number }} [calibration] the box's speed at the
 *   start (calibrate.mjs)
 * @property {number | null} [stealPercent] share of the machine's CPU time its hypervisor gave to others during the
 *   run: a virtual machine's CPUs that are stolen slow every process and thread alike, and make latency noisy
 */

/** All CPUs' ticks from /proc/stat: the total, and the steal (time a hypervisor ran something else); null off Linux. */
function cpuTicks() {
  try {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    return { steal: f[7] ?? 0, total: f.reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** Steal over the run so far, in % of all CPU time (null when not known). */
function stealPercentSince(/** @type {Machine} */ m) {
  const now = cpuTicks();
  if (!m.cpuAtStart || !now || now.total <= m.cpuAtStart.total) return null;
  return Math.round(((now.steal - m.cpuAtStart.steal) / (now.total - m.cpuAtStart.total)) * 1000) / 10;
}

/** @returns {Machine} */
export function machine() {
  const c = cpus();
  return {
    host: hostname(),
    cpus: c.length,
    cpuModel: c[0]?.model.trim() ?? '?',
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${process.platform} ${release()}`,
    loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
    cpuAtStart: cpuTicks(),
  };
}

/** @param {Machine} m */
export function machineLine(m) {
  const steal = typeof m.stealPercent === 'number' ? `, CPU stolen by the hypervisor during the run ${m.stealPercent}%` : '';
  const cal = m.calibration ? `, ${calibrationText(m.calibration)}` : '';
  return `machine: ${m.cpus}× ${m.cpuModel}, ${m.memoryGiB} GiB, node ${m.node}, ${m.os}, load ${m.loadavg.join(' ')}${cal}${steal}`;
}

/**
 * The noise warning printed under every table: the load average says whether anything else was running.
 * @param {Machine} m
 */
export function noiseLine(m) {
  const busy = (m.loadavg[0] ?? 0) > m.cpus * 0.5;
  const stolen = (m.stealPercent ?? 0) >= 5;
  const why = [busy ? `load ${m.loadavg[0]} on ${m.cpus} CPUs` : '', stolen ? `${m.stealPercent}% of the CPU time stolen by the hypervisor` : ''].filter(Boolean).join(', ');
  return `note: figures depend on the machine and are noisy when it is shared${why ? ` (it was: ${why})` : ''}; compare runs of one machine with \`npm run bench -- compare A.json B.json\`.`;
}

/**
 * Text table: figures right-aligned, the first and last (label) columns left-aligned.
 * @param {string[]} head
 * @param {string[][]} rows
 */
export function table(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const last = head.length - 1;
  return [head, ...rows]
    .map((r) => r.map((v, i) => (i === 0 || (i === last && last > 1) ? (v ?? '').padEnd(i === last ? 0 : widths[i] ?? 0) : (v ?? '').padStart(widths[i] ?? 0))).join('  '))
    .join('\n');
}

/**
 * Writes bench/results/<timestamp>-<scenario>.json (or `out`, given with --out) and the HTML report beside it; returns both paths.
 * @param {string} scenario
 * @param {object} result
 * @param {string | true} [out]
 */
export function writeResult(scenario, result, out) {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = typeof out === 'string' ? path.resolve(out) : path.join(RESULTS_DIR, `${stamp}-${scenario}.json`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  const html = file.replace(/\.json$/, '') + '.html';
  writeFileSync(html, renderHtml(result));
  return { file, html };
}

/**
 * @typedef {object} Goal
 * @property {string} name
 * @property {string} target e.g. '≥ 1000 sessions'
 * @property {number | string | null} value
 * @property {boolean | null} met null when the run did not measure it
 */

/**
 * @typedef {object} Result the common shape of every scenario's result (version 2)
 * @property {string} scenario
 * @property {number} version
 * @property {string} startedAt
 * @property {Machine} machine
 * @property {Record<string, unknown>} options
 * @property {string} baseline what the figures are compared with
 * @property {{ head: string[], rows: string[][] }} summary the table printed at the end
 * @property {Record<string, { value: number, unit?: string, better: 'higher' | 'lower' }>} figures what `compare` compares
 * @property {Goal[]} [goals]
 * @property {{ title: string, head: string[], rows: string[][] }[]} [tables] more tables, after the summary
 * @property {string[]} [notes]
 * @property {object[]} [charts] see lib/html.mjs
 */

/**
 * Figures of a result, for `compare`: numbers only, with the direction that is better.
 * @param {Record<string, [number | null | undefined, string, 'higher' | 'lower']>} entries label -> [value, unit, better]
 */
export function figuresOf(entries) {
  /** @type {Result['figures']} */
  const out = {};
  for (const [label, [value, unit, better]] of Object.entries(entries)) {
    if (typeof value === 'number' && Number.isFinite(value)) out[label] = { value, unit, better };
  }
  return out;
}

/**
 * The end of every scenario: writes the JSON and HTML, prints the machine, the baseline, the table, the goals and the paths.
 * @param {Result & Record<string, unknown>} result
 * @param {Record<string, string | true>} options
 */
export function finish(result, options) {
  if (result.machine.stealPercent === undefined) result.machine.stealPercent = stealPercentSince(result.machine);
  const { file, html } = writeResult(result.scenario, { ...result, finishedAt: new Date().toISOString() }, options.out);
  console.log(machineLine(result.machine));
  console.log(`baseline: ${result.baseline}`);
  console.log(table(result.summary.head, result.summary.rows));
  for (const t of result.tables ?? []) console.log(`${t.title}:\n${table(t.head, t.rows)}`);
  for (const g of result.goals ?? []) console.log(`goal: ${g.name} ${g.target}: ${g.value ?? 'n/a'} ${g.met === null ? '(not measured)' : g.met ? 'met' : 'NOT met'}`);
  for (const n of result.notes ?? []) console.log(`note: ${n}`);
  console.log(noiseLine(result.machine));
  console.log(`results: ${path.relative(process.cwd(), file)}`);
  console.log(`report: ${path.relative(process.cwd(), html)}`);
  return { file, html };
}

/**
 * Parses `--name value` and `--flag` options after the scenario name.
 * @param {string[]} argv
 * @returns {{ positional: string[], options: Record<string, string | true> }}
 */
export function parseArgs(argv) {
  /** @type {string[]} */
  const positional = [];
  /** @type {Record<string, string | true>} */
  const options = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a.startsWith('--')) {
      const [name, inline] = a.slice(2).split('=', 2);
      const next = argv[i + 1];
      if (inline !== undefined) options[name ?? ''] = inline;
      else if (next !== undefined && !next.startsWith('--')) options[name ?? ''] = (i++, next);
      else options[name ?? ''] = true;
    } else positional.push(a);
  }
  return { positional, options };
}
