// Entry of the bench suite (`npm run bench -- <scenario> [options]` from the repo root): builds what is missing, then runs one scenario.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR, parseArgs } from './lib/report.mjs';
import { killChildren } from './lib/processes.mjs';

/** Scenario name -> module (paths mirror the source they measure). */
const SCENARIOS = {
  fleet: './listen/fleet.mjs',
  limit: './listen/limit.mjs',
  churn: './listen/churn.mjs',
  'local-latency': './listen/local-latency.mjs',
  codecs: './scripts/bench-codecs.mjs',
  rest: './http/rest.mjs',
  notify: './http/notify.mjs',
  voice: './http/voice.mjs',
  sync: './http/sync.mjs',
  jobs: './jobs/jobs.mjs',
  webhooks: './webhooks/webhooks.mjs',
  'day-summary': './jobs/day-summary.mjs',
  compare: './compare.mjs',
  idle: './idle.mjs',
};

const HELP = `usage: npm run bench -- <scenario> [options]
scenarios:
  fleet     simulated wearables streaming to /v4/listen of the real service (STT: the provider_a fake, or provider_b's
            with --stt provider_b): latency, loss,
            CPU and RSS per session, vs a bare uWebSockets.js server; --ramp searches for capacity
  limit     the box's ceiling: the same generator against a bare uWebSockets.js server that only decodes each frame
  churn     sessions come (5-30 s of audio) and go for 10 minutes: the service's RSS must come back
  local-latency  the local engine (PocketSphinx behind the speech gate): sessions stream espeak-ng speech in real
            time, then stop sending; how soon the first and the last words reach the client
  codecs    CPU per second of audio for each codec, codec shards vs the decoder in-process
  rest      the developer REST API (authenticated GET and POST of memories) vs a bare uWebSockets.js server
  notify    direct notifications from an app through the API into the outbox: accepted per second and p99
  voice     10 s voice messages (WAV) through /v2/voice-message/transcribe to the provider_a fake: req/s, ms each
  sync      offline recordings (10-minute WAVs of espeak-ng speech) through /v2/sync-local-files to the provider_a
            fake: audio hours synced per wall-clock minute
  jobs      conversations ended over REST and processed by the queue's worker: jobs/s and end → processed latency,
            vs a bare BullMQ worker
  webhooks  conversation-created deliveries from the service's queue to a local keep-alive receiver: deliveries/s,
            and p99 enqueue → receipt at a fixed rate
  day-summary  the hourly day summary run for 10,000 users with an LLM fake answering in 1 s: how long it takes
  compare   compare A.json B.json: the ratio between two result files' figures
  idle      RSS of the idle service per role (all, api, listen, jobs), a provider configured, nothing connected
each run prints a table and writes bench/results/<timestamp>-<scenario>.json and .html (charts);
\`npm run bench -- <scenario> --help\` for options`;

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

/** The benches run the compiled service, its fakes and test helpers (fixtures), and the LC3 addon; scripts/setup builds what is missing. */
function ensureBuilt() {
  const needed = ['dist/engine/index.js', 'dist/scripts/token.js', 'dist/scripts/bench-codecs.js', 'dist/test/helpers/codec-fixtures.js', 'dist/test/fakes/deepgram-server.js', 'native/build/Release/lc3.node'];
  if (needed.every((f) => existsSync(path.join(ROOT_DIR, f)))) return;
  step('building the service', 'bash', ['scripts/setup'], ROOT_DIR);
}

const { positional, options } = parseArgs(process.argv.slice(2));
const [scenario, ...rest] = positional;
if (!scenario || scenario === 'help' || !(scenario in SCENARIOS)) {
  console.log(HELP);
  process.exit(scenario && scenario !== 'help' ? 2 : 0);
}
// Ctrl-C or a crash must not leave a service, a fake or a generator running.
process.on('exit', killChildren);
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => {
    killChildren();
    process.exit(130);
  });
}
const mod = await (async () => {
  // No bench-only dependency: Node built-ins, and ws and uWebSockets.js of the service.
  if (scenario !== 'compare') ensureBuilt();
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
