// The idle footprint of each role: the service started as `npm start` runs it (the same node flags), with a speech
// provider configured and nothing connected, its RSS once settled. Run: npm run bench -- idle [--roles all,listen].
import { threadTimes, settledRss } from './lib/procstat.mjs';
import { Progress } from './lib/progress.mjs';
import { figuresOf, finish, machine } from './lib/report.mjs';
import { startService } from './listen/stack.mjs';

export const USAGE = `npm run bench -- idle [--roles all,api,listen,jobs] [--settle 20]
  starts the service once per role (ROLE=…, STT_PROVIDERS=provider_a with a key, sqlite in a temporary DATA_DIR, the
  local Redis), connects nothing, and reports its RSS once settled (at least --settle seconds, until five samples a
  second apart lie within 1%), its threads and its V8 heap
  --out FILE     result file (default bench/results/<timestamp>-idle.json; the HTML report goes beside it)`;

const ROLES = ['all', 'api', 'listen', 'jobs'];
/** The idle RSS a listen node should stay under, in MiB (docs/performance.md, "Idle footprint"). */
export const LISTEN_IDLE_GOAL_MIB = 100;

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const roles = String(options.roles ?? ROLES.join(',')).split(',').filter(Boolean);
  const bad = roles.filter((r) => !ROLES.includes(r));
  if (bad.length > 0) throw new Error(`--roles: unknown role ${bad.join(', ')} (all, api, listen, jobs)`);
  const settleS = Number(options.settle ?? 20);
  if (!(settleS >= 1)) throw new Error('--settle must be at least 1');
  const m = machine();
  const progress = new Progress('idle', roles.length);
  /** @type {{ role: string, rssMiB: number, threads: number, heapUsedMiB: number, heapTotalMiB: number, codecThreads: number }[]} */
  const rows = [];
  try {
    for (const role of roles) {
      // A provider is configured (its address unused until a session opens), as on a production listen node.
      const service = await startService({ env: { ROLE: role, STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: 'ws://127.0.0.1:9/v1/listen', PROVIDER_A_API_KEY: 'idle-bench' } });
      try {
        progress.phase(`${role}: RSS settling`, settleS);
        let seen = 0;
        const rss = await settledRss(service.pid, { minS: settleS, maxS: Math.max(settleS, 45), onSample: () => progress.update(Math.min(settleS, ++seen)) });
        const threads = [...threadTimes(service.pid).values()];
        const mem = await service.memory();
        rows.push({
          role,
          rssMiB: Math.round((rss / 2 ** 20) * 10) / 10,
          threads: threads.length,
          codecThreads: threads.filter((t) => t.name === 'task-decode').length,
          heapUsedMiB: Math.round((mem.heapUsed / 2 ** 20) * 10) / 10,
          heapTotalMiB: Math.round((mem.heapTotal / 2 ** 20) * 10) / 10,
        });
      } finally {
        await service.stop();
      }
    }
  } finally {
    progress.end();
  }
  const listen = rows.find((r) => r.role === 'listen');
  const result = {
    scenario: 'idle',
    version: 2,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { roles, settleS, raw: options },
    baseline: 'none: absolute figures of the service process alone (the shell npm start runs execs node; npm itself stays as its parent)',
    summary: {
      head: ['role', 'RSS MiB (settled)', 'threads', 'codec threads', 'JS heap used / committed, MiB'],
      rows: rows.map((r) => [r.role, String(r.rssMiB), String(r.threads), String(r.codecThreads), `${r.heapUsedMiB} / ${r.heapTotalMiB}`]),
    },
    figures: figuresOf(Object.fromEntries(rows.map((r) => [`${r.role} idle RSS MiB`, [r.rssMiB, 'MiB', 'lower']]))),
    goals: listen ? [{ name: 'listen node idle RSS', target: `≤ ${LISTEN_IDLE_GOAL_MIB} MiB`, value: listen.rssMiB, met: listen.rssMiB <= LISTEN_IDLE_GOAL_MIB }] : [],
    notes: ['codec threads start with the first session, so an idle node has none'],
    roles: rows,
  };
  finish(/** @type {any} */ (result), options);
  return result;
}
