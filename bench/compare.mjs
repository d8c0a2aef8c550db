// `npm run bench -- compare A.json B.json`: every figure two result files share, side by side, with B / A and which is better.
import { readFileSync } from 'node:fs';
import { machineLine, noiseLine, table } from './lib/report.mjs';

export const USAGE = `npm run bench -- compare A.json B.json
  prints each figure A and B share and the ratio B / A, and whether B is better (each figure knows its direction:
  capacity and req/s higher, latency, CPU and RSS lower); works for every scenario's result (version 2) and the
  rest and codecs results of version 1`;

/** Figures of a rest result and whether more is better. */
const REST_FIGURES = /** @type {const} */ ([
  ['requestsPerSec', 'req/s', true],
  ['p50Ms', 'p50 ms', false],
  ['p99Ms', 'p99 ms', false],
]);
/** Figures of a codecs result and whether more is better. */
const CODEC_FIGURES = /** @type {const} */ ([
  ['directUsPerS', 'direct µs/s', false],
  ['engineUsPerS', 'engine µs/s', false],
  ['ratio', 'engine/direct', false],
  ['xRealtime', 'x realtime', true],
]);

/**
 * Flattens a result file into `label -> { value, higherIsBetter }`.
 * @param {any} r
 * @returns {Map<string, { value: number, higherIsBetter: boolean }>}
 */
export function figures(r) {
  /** @type {Map<string, { value: number, higherIsBetter: boolean }>} */
  const out = new Map();
  if (r.figures) {
    for (const [label, f] of Object.entries(r.figures)) {
      const x = /** @type {{ value: number, unit?: string, better: string }} */ (f);
      if (typeof x.value === 'number') out.set(label, { value: x.value, higherIsBetter: x.better === 'higher' });
    }
    return out;
  }
  // Version 1 files (rest, codecs) had no figures list.
  const put = (/** @type {string} */ label, /** @type {unknown} */ value, /** @type {boolean} */ higherIsBetter) => {
    if (typeof value === 'number' && Number.isFinite(value)) out.set(label, { value, higherIsBetter });
  };
  if (r.targets) {
    for (const [name, t] of Object.entries(r.targets)) for (const [k, label, hib] of REST_FIGURES) put(`${name} ${label}`, /** @type {any} */ (t)[k], hib);
    for (const [name, v] of Object.entries(r.ratios ?? {})) put(`${name} / ${r.baseline ?? 'baseline'}`, v, true);
  }
  if (r.rows) {
    for (const [name, row] of Object.entries(r.rows)) for (const [k, label, hib] of CODEC_FIGURES) put(`${name} ${label}`, /** @type {any} */ (row)[k], hib);
  }
  return out;
}

/** @param {string[]} files */
export async function run(_options = {}, files = []) {
  if (files.length !== 2) throw new Error(`usage: ${USAGE}`);
  const [a, b] = files.map((f) => JSON.parse(readFileSync(f, 'utf8')));
  if (a.scenario !== b.scenario) console.log(`warning: comparing a ${a.scenario} result with a ${b.scenario} result`);
  console.log(`A: ${files[0]}\n   ${machineLine(a.machine)}`);
  console.log(`B: ${files[1]}\n   ${machineLine(b.machine)}`);
  if (a.machine?.cpuModel !== b.machine?.cpuModel || a.machine?.cpus !== b.machine?.cpus) console.log('warning: different machines; ratios mostly measure the machines');
  const fa = figures(a);
  const fb = figures(b);
  /** @type {string[][]} */
  const rows = [];
  for (const [label, x] of fa) {
    const y = fb.get(label);
    if (!y) continue;
    const ratio = x.value === 0 ? NaN : y.value / x.value;
    const better = Number.isNaN(ratio) || Math.abs(ratio - 1) < 0.05 ? '≈' : (ratio > 1) === x.higherIsBetter ? 'better' : 'worse';
    rows.push([label, String(x.value), String(y.value), Number.isNaN(ratio) ? 'n/a' : ratio.toFixed(3), better]);
  }
  console.log(table(['figure', 'A', 'B', 'B / A', 'B is'], rows));
  console.log(noiseLine(b.machine));
  return rows;
}
