// What every bench prints and writes: the machine, the baseline, the figures and their ratio to it (STYLE point 10).
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, hostname, release } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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
 */

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
  };
}

/** @param {Machine} m */
export function machineLine(m) {
  return `machine: ${m.cpus}× ${m.cpuModel}, ${m.memoryGiB} GiB, node ${m.node}, ${m.os}, load ${m.loadavg.join(' ')}`;
}

/**
 * The noise warning printed under every table: the load average says whether anything else was running.
 * @param {Machine} m
 */
export function noiseLine(m) {
  const busy = (m.loadavg[0] ?? 0) > m.cpus * 0.5;
  return `note: figures depend on the machine and are noisy when it is shared${busy ? ` (it was: load ${m.loadavg[0]} on ${m.cpus} CPUs)` : ''}; compare runs of one machine with \`npm run bench -- compare A.json B.json\`.`;
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
 * Writes bench/results/<timestamp>-<scenario>.json (or `out`, given with --out) and returns its path.
 * @param {string} scenario
 * @param {object} result
 * @param {string | true} [out]
 */
export function writeResult(scenario, result, out) {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = typeof out === 'string' ? path.resolve(out) : path.join(RESULTS_DIR, `${stamp}-${scenario}.json`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  return file;
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
