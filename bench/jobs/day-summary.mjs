// The hourly day summary run for many users at once: every user due at the same UTC hour, each with a push token and
// a conversation of that day, an LLM fake answering each summary after a fixed delay. Measures how long the run takes
// from the hour's job to the last summary stored, at the default concurrency, on one ROLE=all node (sqlite).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { BENCH_DIR, ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { cleanRedis, freePort, serviceEnv, track } from '../lib/processes.mjs';
import { Progress } from '../lib/progress.mjs';

export const USAGE = `npm run bench -- day-summary [--users 10000] [--llm-ms 1000] [--smoke]
  --users    users due in the hour, each with one conversation (default 10000)
  --llm-ms   the LLM fake's answer delay, in milliseconds (default 1000)
  --smoke    200 users, 50 ms answers
  --out      result file (default bench/results/<timestamp>-day-summary.json)`;

/** Goal: the run for 10,000 users within 15 minutes. */
export const GOAL_MINUTES = 15;

const dist = (/** @type {string} */ p) => import(path.join(ROOT_DIR, 'dist', p));

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const users = Number(options.users ?? (smoke ? 200 : 10_000));
  const llmMs = Number(options['llm-ms'] ?? (smoke ? 50 : 1000));
  const m = machine();
  const port = await freePort();
  const llm = track(spawn(process.execPath, [path.join(BENCH_DIR, 'jobs', 'llm-fake.mjs'), '--port', String(port), '--delay-ms', String(llmMs)], { stdio: ['ignore', 'pipe', 'inherit'] }));
  await once(/** @type {import('node:stream').Readable} */ (llm.stdout), 'data');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-day-summary-'));
  const env = await serviceEnv(dataDir, { LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, LLM_MAX_RETRIES: '0' });
  const { loadConfig } = await dist('engine/config.js');
  const { Service } = await dist('engine/app.js');
  const { DAY_SUMMARY_CONCURRENCY } = await dist('engine/summaries/schedule.js');
  const service = await Service.start({ config: loadConfig(env) });
  let seconds = 0;
  let stored = 0;
  try {
    const { knex } = service.services.store;
    const hour = Math.floor(Date.now() / 3600_000) * 3600_000;
    const localHour = new Date(hour).getUTCHours();
    const seeding = new Progress('seeding', users);
    const now = new Date().toISOString();
    const started = new Date(hour - 3600_000 * (localHour >= 12 ? 0 : 24) + 60_000).toISOString();
    for (let i = 0; i < users; i += 500) {
      const uids = Array.from({ length: Math.min(500, users - i) }, (_, k) => `bench-${i + k}`);
      await knex('users').insert(uids.map((id) => ({ id, created_at: now })));
      await knex('user_settings').insert(uids.map((uid) => ({ uid, time_zone: 'UTC', daily_summary_enabled: true, daily_summary_hour: localHour, updated_at: now })));
      await knex('push_tokens').insert(uids.map((uid) => ({ id: randomUUID(), uid, token: `token-${uid}`, created_at: now, updated_at: now })));
      for (const uid of uids) {
        await service.services.conversations.create({ userId: uid, status: 'completed', startedAt: started, finishedAt: started, source: 'omi', language: 'en', segments: [{ text: 'We decided to ship the bench on Friday.', start: 0, end: 3 }], now: Date.now() });
      }
      seeding.update(i + uids.length);
    }
    const progress = new Progress('summaries', users);
    const t0 = performance.now();
    const queued = await service.daySummarySchedule.runHour(hour);
    if (queued !== users) throw new Error(`${queued} users due, expected ${users}`);
    for (;;) {
      stored = Number((await knex('daily_summaries').count({ n: '*' }))[0].n);
      progress.update(stored, `${stored} stored`);
      if (stored >= users) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    seconds = (performance.now() - t0) / 1000;
  } finally {
    await service.stop();
    llm.kill('SIGTERM');
    await cleanRedis(env.REDIS_PREFIX);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const minutes = seconds / 60;
  const result = {
    scenario: 'day-summary',
    version: 1,
    startedAt: new Date().toISOString(),
    machine: m,
    options: { users, llmMs, smoke },
    baseline: `none: the goal is absolute (${GOAL_MINUTES} min for 10,000 users); a model answering in ${llmMs} ms bounds a node to ${DAY_SUMMARY_CONCURRENCY} summaries per ${llmMs} ms`,
    summary: {
      head: ['users', 'run s', 'summaries/s', 'concurrency', 'what'],
      rows: [[String(users), seconds.toFixed(1), (users / seconds).toFixed(1), String(DAY_SUMMARY_CONCURRENCY), 'selection, per-user jobs, lock, LLM, store, push (outbox)']],
    },
    figures: figuresOf({ 'day-summary run s': [seconds, 's', 'lower'], 'day-summary per s': [users / seconds, '/s', 'higher'] }),
    goals: [{ name: `the hourly run for ${users} users`, target: `≤ ${GOAL_MINUTES} min`, value: Number(minutes.toFixed(1)), met: users >= 10_000 ? minutes <= GOAL_MINUTES : null }],
    notes: [],
  };
  finish(/** @type {any} */ (result), options);
  return result;
}
