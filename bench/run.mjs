// Entry of the bench suite (`npm run bench -- <scenario> [options]` from the repo root): prepares what is missing, then runs one scenario.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, ROOT_DIR, parseArgs } from './lib/report.mjs';

/** Scenario name -> module (paths mirror the source they measure). */
const SCENARIOS = {
  rest: './http/rest.mjs',
  sessions: './listen/sessions.mjs',
  codecs: './scripts/bench-codecs.mjs',
  compare: './compare.mjs',
};

const HELP = `usage: npm run bench -- <scenario> [options]
scenarios:
  rest      the developer REST API (authenticated GET and POST of memories) vs a bare uWebSockets.js server
  sessions  live /v4/listen sessions: server RSS idle, per idle and per streaming opus_fs320 session, CPU per session-second
  codecs    CPU per second of audio for each codec, codec shards vs the decoder in-process
  compare   compare A.json B.json: the ratio between two result files' figures
results go to bench/results/<timestamp>-<scenario>.json; \`npm run bench -- <scenario> --help\` for options`;

/**
 * Runs a command in `cwd`, inheriting stdio; exits with its status when it fails.
 * @param {string} what
 * @param {string} cmd
 * @param {string[]} args
 * @param {string} cwd
 */
function step(what, cmd, args, cwd) {
  process.stderr.write(`bench: ${what}: ${cmd} ${args.join(' ')}\n`);
  const r = spawnSync(cmd, args, { cwd, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) {
    process.stderr.write(`bench: ${what} failed (${r.error?.message ?? `exit ${r.status}`})\n`);
    process.exit(1);
  }
}

/** bench/ has its own dependencies (autocannon); a fresh clone installs them on first use. */
function ensureBenchDeps() {
  if (existsSync(path.join(BENCH_DIR, 'node_modules/autocannon/package.json'))) return;
  step('installing bench dependencies', 'npm', ['install', '--prefix', BENCH_DIR, '--no-audit', '--no-fund', '--loglevel=error'], ROOT_DIR);
}

/**
 * The benches run the compiled service and scripts (and codecs the LC3 addon); scripts/setup builds what is missing.
 * @param {string} scenario
 */
function ensureBuilt(scenario) {
  const needed = ['dist/engine/index.js', 'dist/scripts/token.js', 'dist/scripts/bench-codecs.js'];
  if (scenario === 'codecs') needed.push('native/build/Release/lc3.node');
  if (needed.every((f) => existsSync(path.join(ROOT_DIR, f)))) return;
  step('building the service', 'bash', ['scripts/setup'], ROOT_DIR);
}

const { positional, options } = parseArgs(process.argv.slice(2));
const [scenario, ...rest] = positional;
if (!scenario || scenario === 'help' || !(scenario in SCENARIOS)) {
  console.log(HELP);
  process.exit(scenario && scenario !== 'help' ? 2 : 0);
}
const mod = await (async () => {
  if (scenario !== 'compare') {
    // sessions needs no bench-only dependency (ws comes with the service).
    if (scenario !== 'sessions') ensureBenchDeps();
    ensureBuilt(scenario);
  }
  return import(SCENARIOS[/** @type {keyof typeof SCENARIOS} */ (scenario)]);
})();
if (options.help) {
  console.log(mod.USAGE);
  process.exit(0);
}
try {
  await mod.run(options, rest);
} catch (err) {
  process.stderr.write(`bench ${scenario}: ${/** @type {Error} */ (err).message}\n`);
  process.exitCode = 1;
}
