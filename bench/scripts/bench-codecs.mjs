// Runs the codec micro-bench (scripts/bench-codecs.ts, compiled to dist/) and keeps its table as JSON in bench/results/.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT_DIR, machine, noiseLine, writeResult } from '../lib/report.mjs';

export const USAGE = `npm run bench -- codecs [--sessions 4]
  --sessions     concurrent sessions per codec (default 4)
  --out          result file (default bench/results/<timestamp>-codecs.json)`;

/** Column titles of scripts/bench-codecs.ts and the JSON field each becomes. */
const COLUMNS = /** @type {const} */ ({
  codec: 'codec',
  'in Hz': 'inHz',
  'direct µs/s': 'directUsPerS',
  'engine µs/s': 'engineUsPerS',
  ratio: 'ratio',
  'x realtime (wall)': 'xRealtime',
});

/**
 * Turns the printed table back into rows: columns are separated by two or more spaces.
 * @param {string} out
 */
export function parseCodecTable(out) {
  const lines = out.split('\n');
  const headAt = lines.findIndex((l) => /^\s*codec\s{2,}/.test(l));
  if (headAt < 0) return [];
  const head = (lines[headAt] ?? '').trim().split(/\s{2,}/);
  /** @type {Record<string, string | number | null>[]} */
  const rows = [];
  for (const line of lines.slice(headAt + 1)) {
    if (!line.trim()) break;
    const cells = line.trim().split(/\s{2,}/);
    /** @type {Record<string, string | number | null>} */
    const row = {};
    head.forEach((h, i) => {
      const key = COLUMNS[/** @type {keyof typeof COLUMNS} */ (h)] ?? h;
      const v = cells[i] ?? '';
      row[key] = key === 'codec' ? v : v === 'n/a' ? null : Number(v);
    });
    rows.push(row);
  }
  return rows;
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const sessions = Number(options.sessions ?? 4);
  if (!Number.isInteger(sessions) || sessions < 1) throw new Error('--sessions must be a positive integer');
  const m = machine();
  const child = spawn(process.execPath, [path.join(ROOT_DIR, 'dist/scripts/bench-codecs.js'), String(sessions)], { cwd: ROOT_DIR, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (/** @type {Buffer} */ b) => {
    out += b.toString();
    process.stdout.write(b);
  });
  const code = await new Promise((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`dist/scripts/bench-codecs.js exited with ${code}`);
  const rows = parseCodecTable(out);
  const result = {
    scenario: 'codecs',
    version: 1,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { sessions },
    baseline: 'direct',
    rows: Object.fromEntries(rows.map((r) => [String(r.codec), r])),
    output: out,
  };
  const file = writeResult('codecs', result, options.out);
  console.log(noiseLine(m));
  console.log(`results: ${path.relative(process.cwd(), file)}`);
  return result;
}
