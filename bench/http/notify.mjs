// Direct notifications accepted per second through the API into the outbox: app secret, app and install lookups, the
// hourly limit in Redis, the outbox insert and the stream event, on one service node (sqlite, no FCM).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readdirSync } from 'node:fs';
import { summarize } from '../lib/cpuprofile.mjs';
import { RESULTS_DIR, ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { load } from './load.mjs';
import { cleanRedis, idToken, serviceEnv, startChild } from '../lib/processes.mjs';

export const USAGE = `npm run bench -- notify [--seconds 10] [--connections 50] [--users 8000] [--profile] [--smoke]
  --seconds      measured duration, in seconds (default 10)
  --connections  keep-alive connections (default 50)
  --users        users who installed the app; requests go to each in turn, and each takes 10 an hour (default 8000)
  --profile      run the service under node --cpu-prof and print its top self-time costs
  --smoke        1 s, 1000 users (the test in test/bench/ uses it)
  --out          result file (default bench/results/<timestamp>-notify.json)`;

/** Goals: direct notifications accepted per second, and their p99 latency. */
export const GOAL_PER_SEC = 2000;
export const GOAL_P99_MS = 50;
/** The hourly limit per app and user (DIRECT_PER_HOUR in engine/notifications/direct-limit.ts). */
const PER_USER = 10;

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const seconds = Number(options.seconds ?? (smoke ? 1 : 10));
  const connections = Number(options.connections ?? 50);
  // Each user may have 10 an hour: the smoke's users must outlast a fast machine's second.
  const users = Number(options.users ?? (smoke ? 1000 : 8000));
  const profileDir = options.profile === true ? path.join(RESULTS_DIR, 'profiles', new Date().toISOString().replace(/[:.]/g, '-')) : undefined;
  const m = machine();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-notify-'));
  const env = await serviceEnv(dataDir);
  /** @type {Awaited<ReturnType<typeof startChild>> | undefined} */
  let service;
  let serviceExit = /** @type {number | null} */ (null);
  let r;
  let stored = 0;
  try {
    service = await startChild({ name: 'service', args: [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), 'dist/engine/index.js'], env, port: Number(env.PORT), probePath: '/health' });
    const token = await idToken('bench-dev', env);
    const created = await fetch(`${service.url}/v1/apps`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench Coach', capabilities: [], private: false }),
    });
    if (created.status !== 200) throw new Error(`app creation answered ${created.status}`);
    const app = /** @type {{ id: string, secret: string }} */ (await created.json());

    // Installs written straight to the store: thousands of sign-ins would cost more than the run.
    const { openStore } = await import(path.join(ROOT_DIR, 'dist/engine/db/store.js'));
    const store = openStore({ dataDir, databaseUrl: undefined, databaseSchema: 'public' });
    const uids = Array.from({ length: users }, (_, i) => `bench-user-${i}`);
    const at = new Date().toISOString();
    for (let i = 0; i < uids.length; i += 200) {
      await store.knex('app_installs').insert(uids.slice(i, i + 200).map((uid) => ({ app_id: app.id, uid, scopes: '[]', installed_at: at })));
    }

    const message = encodeURIComponent('Bench reminder: stand up and stretch for a minute');
    const paths = uids.map((uid) => `/v2/integrations/${app.id}/notification?uid=${uid}&message=${message}`);
    r = await load({ url: `${service.url}${paths[0]}`, method: 'POST', headers: { authorization: `Bearer ${app.secret}` }, paths, connections, duration: seconds });
    const [{ n }] = await store.knex('notifications').count({ n: '*' });
    stored = Number(n);
    await store.close();
  } finally {
    if (service) serviceExit = await service.stop();
    await cleanRedis(env.REDIS_PREFIX);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const perSec = Math.round(r.requests.average);
  const profFile = profileDir ? readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile')) : undefined;
  const prof = profFile && profileDir ? summarize(path.join(profileDir, profFile)) : undefined;
  const result = {
    scenario: 'notify',
    version: 2,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { seconds, connections, users, smoke },
    baseline: `none: the goals are absolute (≥ ${GOAL_PER_SEC}/s, p99 < ${GOAL_P99_MS} ms); ${connections} keep-alive connections (bench/http/load.mjs), each request to the next of ${users} users`,
    summary: {
      head: ['target', 'req/s', 'p50 ms', 'p99 ms', 'refused', 'outbox rows', 'what'],
      rows: [['direct POST /v2/integrations/{app_id}/notification', String(perSec), String(r.latency.p50), String(r.latency.p99), String(r.non2xx + r.errors + r.timeouts), String(stored), 'secret, app, install, hourly limit (Redis), outbox insert (sqlite), stream event']],
    },
    figures: figuresOf({ 'notify req/s': [perSec, 'req/s', 'higher'], 'notify p50 ms': [r.latency.p50, 'ms', 'lower'], 'notify p99 ms': [r.latency.p99, 'ms', 'lower'] }),
    goals: [
      { name: 'direct notifications accepted', target: `≥ ${GOAL_PER_SEC}/s`, value: perSec, met: perSec >= GOAL_PER_SEC },
      { name: 'their p99 latency', target: `< ${GOAL_P99_MS} ms`, value: r.latency.p99, met: r.latency.p99 < GOAL_P99_MS },
    ],
    notes: [`${users} users × ${PER_USER} an hour bound the run to ${users * PER_USER} notifications`, ...(prof ? [`profile of the service: ${prof.busyMs} ms busy of ${prof.totalMs} ms`] : [])],
    tables: prof
      ? [
          { title: 'service profile by area', head: ['self ms', '%', 'area'], rows: prof.areas.map((a) => [String(a.selfMs), a.pct.toFixed(1), a.area]) },
          { title: 'service profile by function', head: ['self ms', '%', 'function', 'where'], rows: prof.functions.map((f) => [String(f.selfMs), f.pct.toFixed(1), f.name, f.where]) },
        ]
      : [],
    serviceExitCode: serviceExit,
  };
  finish(/** @type {any} */ (result), options);
  if (r.non2xx + r.errors + r.timeouts > 0 || r.requests.total === 0) throw new Error('some requests failed (non-2xx, errors or timeouts): the figures are not valid');
  if (stored < r.requests.total) throw new Error(`${r.requests.total} accepted but ${stored} outbox rows`);
  if (serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}
