// Runs the codec micro-bench (scripts/bench-codecs.ts, compiled to dist/): engine path vs the codec alone, per codec,
// in the common result format (table, JSON, HTML with a bar chart).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { Progress } from '../lib/progress.mjs';
import { track } from '../lib/processes.mjs';
import { CODECS as CODEC_FIXTURES } from '../listen/fixtures.mjs';

const CODECS = Object.keys(CODEC_FIXTURES);

export const USAGE = `npm run bench -- codecs [--sessions 50] [--messages 2] [--window 0] [--codec opus,lc3]
  --sessions     concurrent sessions per codec (default 50: a loaded node, where one shard task serves many sessions)
  --messages     frames each session keeps outstanding (default 2: one more pushed as each comes back decoded)
  --window       the shards' batch window in ms (default 0; the service's 5 ms only delays a task after an idle spell)
  --codec        only these codecs (comma-separated; default all seven)
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
  const sessions = Number(options.sessions ?? 50);
  if (!Number.isInteger(sessions) || sessions < 1) throw new Error('--sessions must be a positive integer');
  const messages = Number(options.messages ?? 2);
  if (!Number.isInteger(messages) || messages < 1) throw new Error('--messages must be a positive integer');
  const windowMs = Number(options.window ?? 0);
  if (!Number.isFinite(windowMs) || windowMs < 0) throw new Error('--window must be a number of ms ≥ 0');
  const only = typeof options.codec === 'string' ? options.codec.split(',').filter(Boolean) : CODECS;
  for (const c of only) if (!CODECS.includes(c)) throw new Error(`--codec: unknown codec ${c} (one of ${CODECS.join(', ')})`);
  const m = machine();
  const progress = new Progress('codecs', only.length, 'codecs');
  progress.update(0, 'encoding the fixtures');
  const child = track(spawn(process.execPath, [path.join(ROOT_DIR, 'dist/scripts/bench-codecs.js'), String(sessions), String(messages), only.join(','), String(windowMs)], { cwd: ROOT_DIR, stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  child.stdout.on('data', (/** @type {Buffer} */ b) => (out += b.toString()));
  child.stderr.on('data', (/** @type {Buffer} */ b) => {
    err += b.toString();
    const done = [...err.matchAll(/^bench-codecs: (\S+) done \((\d+)\/\d+\)$/gm)].at(-1);
    if (done) progress.update(Number(done[2]), `${done[1]} done`);
  });
  const code = await new Promise((resolve) => child.on('close', resolve));
  progress.end();
  if (code !== 0) throw new Error(`dist/scripts/bench-codecs.js exited with ${code}: ${err.slice(-2000)}`);
  const rows = parseCodecTable(out);
  const baseline = out.split('\n').find((l) => l.startsWith('baseline: '))?.slice(10) ?? 'the decoder called in-process';
  /** @type {Record<string, [number | null | undefined, string, 'higher' | 'lower']>} */
  const figures = {};
  for (const r of rows) {
    figures[`${r.codec} engine µs/s`] = [/** @type {number} */ (r.engineUsPerS), 'µs', 'lower'];
    figures[`${r.codec} direct µs/s`] = [/** @type {number} */ (r.directUsPerS), 'µs', 'lower'];
    figures[`${r.codec} engine/direct`] = [/** @type {number} */ (r.ratio), '', 'lower'];
    figures[`${r.codec} x realtime`] = [/** @type {number} */ (r.xRealtime), 'x', 'higher'];
  }
  const cell = (/** @type {unknown} */ x) => (x === null || x === undefined ? 'n/a' : String(x));
  const result = {
    scenario: 'codecs',
    version: 2,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { sessions, messages, windowMs, codecs: only },
    baseline: `${baseline} (direct); engine = the codec shards, ${sessions} concurrent sessions per codec, ${messages} frame(s) outstanding each, batch window ${windowMs} ms`,
    summary: {
      head: ['codec', 'in Hz', 'direct µs per s of audio', 'engine µs per s of audio', 'engine / direct', 'x realtime (wall)'],
      rows: rows.map((r) => [cell(r.codec), cell(r.inHz), cell(r.directUsPerS), cell(r.engineUsPerS), cell(r.ratio), cell(r.xRealtime)]),
    },
    figures: figuresOf(figures),
    charts: [
      {
        kind: 'bar',
        title: 'CPU per second of audio',
        yLabel: 'µs per s of audio',
        categories: rows.map((r) => String(r.codec)),
        series: [
          { name: 'direct (decoder in-process)', values: rows.map((r) => /** @type {number | null} */ (r.directUsPerS)) },
          { name: 'engine (codec shards)', values: rows.map((r) => /** @type {number | null} */ (r.engineUsPerS)) },
        ],
      },
    ],
    rows: Object.fromEntries(rows.map((r) => [String(r.codec), r])),
    output: out,
  };
  finish(/** @type {any} */ (result), options);
  return result;
}
