// Macro bench of the developer REST API, the real service vs a bare uWebSockets.js server: GET memories (auth, rate
// limit, gate, reused answer), the same GET on a node that keeps no answers, POST of one memory, and the bare server.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BENCH_DIR, RESULTS_DIR, finish, machine } from '../lib/report.mjs';
import { Progress } from '../lib/progress.mjs';
import { load } from './load.mjs';
import { UNREACHED_RATE_LIMITS, cleanRedis, freePort, idToken, serviceEnv, startChild } from '../lib/processes.mjs';
import { restResult } from './rest-report.mjs';

export const USAGE = `npm run bench -- rest [--seconds 10] [--connections 50] [--pipelining 1] [--warmup 1] [--targets get,uncached,post,bare] [--profile] [--smoke]
  --seconds      measured duration per target, in seconds (default 10)
  --warmup       unmeasured run before each target, in seconds (default 1; 0 with --smoke)
  --targets      which targets to run, comma-separated (default all: get,uncached,post,bare)
  --profile      run the service under node --cpu-prof and print its top self-time costs
  --smoke        1 s per target, no warm-up (the test in test/bench/ uses it)
  --out          result file (default bench/results/<timestamp>-rest.json)`;

const ROUTE = '/v1/dev/user/memories';
const SEED_MEMORIES = 100;
const SEED_BATCH = 25; // MAX_MEMORIES_BATCH in http/routes/memories.ts

/**
 * @typedef {object} Target
 * @property {string} name
 * @property {string} method
 * @property {string} path
 * @property {string} what
 * @property {number} requestsPerSec mean requests per second over the measured run
 * @property {number} p50Ms median latency, in milliseconds
 * @property {number} p99Ms 99th percentile latency, in milliseconds
 * @property {number} requests completed requests
 * @property {number} non2xx answers that were not 2xx (a bench with any is broken)
 * @property {number} errors connection errors
 * @property {number} timeouts
 * @property {number} bytesPerSec
 */

/**
 * @param {Record<string, string | true>} options
 */
export async function run(options) {
  const smoke = options.smoke === true;
  const seconds = Number(options.seconds ?? (smoke ? 1 : 10));
  const warmup = Number(options.warmup ?? (smoke ? 0 : 1));
  const connections = Number(options.connections ?? 50);
  const pipelining = Number(options.pipelining ?? 1);
  const targets = String(options.targets ?? 'get,uncached,post,bare').split(',');
  const profile = options.profile === true;
  for (const [k, v] of Object.entries({ seconds, warmup, connections, pipelining })) {
    if (!Number.isFinite(v) || v < 0 || (k !== 'warmup' && v === 0)) throw new Error(`--${k} must be a positive number`);
  }
  const m = machine();

  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-rest-'));
  const profileDir = path.join(RESULTS_DIR, 'profiles', new Date().toISOString().replace(/[:.]/g, '-'));
  const env = await serviceEnv(dataDir, UNREACHED_RATE_LIMITS);
  const redisPrefix = env.REDIS_PREFIX;
  /** @type {Awaited<ReturnType<typeof startChild>>[]} */
  const children = [];
  /** The service nodes among the children. */
  const services = new Set();
  /** @type {Record<string, Target>} */
  const results = {};
  let serviceExit = /** @type {number | null} */ (null);
  try {
    const service = await startChild({
      name: 'service',
      args: [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), 'dist/engine/index.js'],
      env,
      port: Number(env.PORT),
      probePath: '/health',
    });
    children.push(service);
    services.add(service);

    // A key for one user, as test/helpers/service.ts makes one, and 100 memories to read.
    const uid = 'bench-user';
    const token = await idToken(uid, env);
    const keyRes = await fetch(`${service.url}/v1/dev/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['memories:read', 'memories:write'] }),
    });
    if (keyRes.status !== 200) throw new Error(`key creation answered ${keyRes.status}: ${await keyRes.text()}`);
    const key = /** @type {{ key: string }} */ (await keyRes.json()).key;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    for (let i = 0; i < SEED_MEMORIES; i += SEED_BATCH) {
      const memories = Array.from({ length: SEED_BATCH }, (_, j) => ({ content: `Bench memory ${i + j}: prefers oat milk in the morning coffee.`, tags: ['bench'] }));
      const res = await fetch(`${service.url}${ROUTE}/batch`, { method: 'POST', headers: auth, body: JSON.stringify({ memories }) });
      if (res.status !== 200) throw new Error(`seeding answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
    const first = await fetch(`${service.url}${ROUTE}`, { headers: auth });
    const getBody = Buffer.from(await first.arrayBuffer());
    if (first.status !== 200) throw new Error(`GET ${ROUTE} answered ${first.status}: ${getBody}`);

    // The baseline answers the very bytes the real GET answered, so the ratio measures our work, not payload size.
    const bodyFile = path.join(dataDir, 'bare-body.json');
    writeFileSync(bodyFile, getBody);
    // A second node of the same deployment (same store, same Redis prefix) that keeps no answers: every GET reads sqlite
    // and serialises, as on the first node right after a write. Started after the first, so migrations have run.
    let uncachedUrl = '';
    if (targets.includes('uncached')) {
      const port = await freePort();
      const node2 = await startChild({ name: 'service (no answer cache)', args: ['dist/engine/index.js'], env: { ...env, PORT: String(port), RESPONSE_CACHE_BYTES: '0' }, port, probePath: '/health' });
      children.push(node2);
      services.add(node2);
      uncachedUrl = node2.url;
    }

    const barePort = await freePort();
    if (targets.includes('bare')) {
      children.push(
        await startChild({ name: 'bare uWS', args: [path.join(BENCH_DIR, 'http/bare-uws.mjs'), '--port', String(barePort), '--path', ROUTE, '--body-file', bodyFile], env: {}, port: barePort, probePath: ROUTE }),
      );
    }

    const postBody = JSON.stringify({ content: 'Bench: met Sam at the climbing gym, wants the route beta.', tags: ['bench'] });
    const plan = [
      { name: 'get', method: 'GET', url: `${service.url}${ROUTE}`, headers: auth, what: 'auth + rate limit + gate + answer reused while the data is unchanged (25 of 100 memories)' },
      { name: 'uncached', method: 'GET', url: `${uncachedUrl}${ROUTE}`, headers: auth, what: 'same GET, second node with RESPONSE_CACHE_BYTES=0: sqlite read + JSON every time' },
      { name: 'post', method: 'POST', url: `${service.url}${ROUTE}`, headers: auth, body: postBody, what: 'auth + rate limit + gate + validation + data version + sqlite insert' },
      { name: 'bare', method: 'GET', url: `http://127.0.0.1:${barePort}${ROUTE}`, headers: {}, what: `bare uWS, constant ${getBody.length}-byte JSON (baseline)` },
    ].filter((p) => targets.includes(p.name));

    const progress = new Progress('rest', plan.length * (warmup + seconds), 's');
    const t0 = performance.now();
    const ticker = setInterval(() => progress.update((performance.now() - t0) / 1000, Object.keys(results).map((n) => `${n} ${results[n]?.requestsPerSec} req/s`).join('  ')), 250);
    for (const p of plan) {
      const ac = { url: p.url, method: p.method, headers: p.headers, connections, pipelining, ...(p.body ? { body: p.body } : {}) };
      if (warmup > 0) await load({ ...ac, duration: warmup });
      const r = await load({ ...ac, duration: seconds });
      results[p.name] = {
        name: p.name,
        method: p.method,
        path: ROUTE,
        what: p.what,
        requestsPerSec: Math.round(r.requests.average),
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        requests: r.requests.total,
        non2xx: r.non2xx,
        errors: r.errors,
        timeouts: r.timeouts,
        bytesPerSec: Math.round(r.throughput.average),
      };
    }
    clearInterval(ticker);
    progress.update(plan.length * (warmup + seconds));
    progress.end();
  } finally {
    // The services first: their exit codes say whether they shut down cleanly under load; --cpu-prof writes the profile on exit.
    for (const c of children) {
      const code = await c.stop();
      // The first non-zero exit of a service node is the one reported.
      if (services.has(c) && (serviceExit === null || serviceExit === 0)) serviceExit = code;
    }
    await cleanRedis(redisPrefix);
    rmSync(dataDir, { recursive: true, force: true });
  }

  const result = restResult({ m, options: { seconds, warmup, connections, pipelining, targets, profile, smoke }, results, profileDir: profile ? profileDir : undefined, serviceExit });
  finish(/** @type {any} */ (result), options);
  const rows = Object.values(results);

  const broken = rows.some((t) => t.non2xx + t.errors + t.timeouts > 0 || t.requests === 0);
  if (broken) throw new Error('some requests failed (non-2xx, errors or timeouts): the figures are not valid');
  if (serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}
