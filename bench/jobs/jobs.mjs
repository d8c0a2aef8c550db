// Macro bench of the processing queue end to end (POST /v1/conversations → job → processor → `memory_created`), beside a
// bare BullMQ worker as baseline: jobs/s and end-to-processed time are what JOB_CONCURRENCY and `ROLE=jobs` are sized by.
// One file because the service run and the bare-worker baseline share their seeding and report.
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import knexFactory from 'knex';
import { summarize } from '../lib/cpuprofile.mjs';
import { BENCH_DIR, RESULTS_DIR, ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { Progress } from '../lib/progress.mjs';
import { Histogram } from '../lib/histogram.mjs';
import { ProcSampler, cpuSeconds, median } from '../lib/procstat.mjs';
import { UNREACHED_RATE_LIMITS, cleanRedis, freePort, serviceEnv, startChild, track } from '../lib/processes.mjs';
import { SERVICE_NODE_ARGS, signTokens } from '../listen/stack.mjs';

export const USAGE = `npm run bench -- jobs [--jobs 2000] [--concurrency 16] [--llm-ms D] [--segments 30] [--in-flight 32] [--rate R] [--store sqlite|pg] [--job-nodes N] [--targets service,bare] [--timeout 300] [--profile] [--smoke]
  --jobs         conversations ended and processed (default 2000; 20 with --smoke)
  --concurrency  JOB_CONCURRENCY of the service, and the bare worker's concurrency (default 16, the service's default)
  --llm-ms       process with the LLM processor against a local OpenAI-compatible fake that answers after D ms
                 (default: the built-in processor, which \`npm start\` runs when LLM_BASE_URL is not set)
  --segments     transcript segments per conversation, ~20 words each (default 30)
  --in-flight    end requests (or bare job adds) in flight at once (default 32)
  --rate         end R conversations per second instead of all as fast as --in-flight allows
  --store        sqlite (default: the embedded store) or pg (PostgreSQL at 127.0.0.1:5432/test, a schema of its own)
  --job-nodes    N more service nodes with ROLE=jobs run the jobs, the first node (ROLE=api) only takes the requests
                 (default 0: one node, ROLE=all; needs --store pg, the store nodes share)
  --targets      which targets to run, comma-separated (default service,bare)
  --timeout      seconds to wait for the last job of a target (default 300)
  --profile      run the service under node --cpu-prof and print its top self-time costs
  --smoke        20 jobs of 5 segments (the test in test/bench/ uses it)
  --out          result file (default bench/results/<timestamp>-jobs.json)`;

const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';
const SENTENCES = [
  'we should send the revised budget to Maria before Friday',
  'the venue for the offsite still has to confirm the booking',
  'remind me to call the dentist about moving the appointment',
  'I think the prototype battery lasts about nine hours now',
  'let us review the hiring plan again next Tuesday morning',
  'the client asked for a demo of the new dashboard',
  'my sister is visiting in March so I need the guest room ready',
  'we agreed to try the climbing gym on Thursday evenings',
];

/**
 * @typedef {object} TargetRun
 * @property {string} name
 * @property {string} what
 * @property {number} jobs
 * @property {number} completed
 * @property {number} lost jobs whose completion never arrived within --timeout
 * @property {number} refused end requests (or job adds) that failed
 * @property {number} enqueueS seconds from the first request to the last answered
 * @property {number} drainS seconds from the first request to the last completion
 * @property {number} jobsPerSec completed / drainS
 * @property {ReturnType<Histogram['summary']>} latency from the end request (job add) to its completion event, ms
 * @property {number | null} cpuMsPerJob CPU of the process that runs the jobs (service or bare worker), per job
 * @property {number | null} redisCpuMsPerJob CPU of redis-server per job (null when its pid is not readable)
 * @property {number | null} llmCpuMsPerJob CPU of the LLM fake per job (service with --llm-ms only)
 * @property {number | null} rssMiB median RSS of the process that runs the jobs while it ran them
 * @property {[number, number][]} perSecond completions in each second since the target started
 * @property {[number, number][]} p95PerSecond latency p95 of the jobs completed in each second
 */

/** The pid of the local redis-server, for its CPU per job; undefined when there is none to read. */
function redisPid() {
  try {
    const pid = Number(execFileSync('pgrep', ['-xo', 'redis-server']).toString().trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** A transcript of `n` segments, 4 s each, two speakers taking turns. */
function transcript(/** @type {number} */ n, /** @type {number} */ seed) {
  return Array.from({ length: n }, (_, i) => ({
    text: `${SENTENCES[(seed + i) % SENTENCES.length]} and ${SENTENCES[(seed * 7 + i * 3) % SENTENCES.length]}`,
    start: i * 4,
    end: i * 4 + 3.8,
    speaker: `SPEAKER_0${i % 2}`,
    speakerId: i % 2,
    isUser: i % 2 === 0,
  }));
}

/**
 * Creates the users and their in-progress conversations with the service's own repositories (migrations included),
 * before the service starts, so the measured part is only the queue's path. Answers the conversation id of each user.
 * @param {{ dataDir: string, databaseUrl?: string, databaseSchema?: string }} storeOpts
 * @param {string[]} uids
 * @param {number} segments
 * @param {Progress} progress
 */
async function seed(storeOpts, uids, segments, progress) {
  const dist = (/** @type {string} */ p) => import(path.join(ROOT_DIR, 'dist', p));
  const { openStore } = await dist('engine/db/store.js');
  const { ConversationsRepository } = await dist('engine/db/conversations.js');
  const { UsersRepository } = await dist('engine/db/users.js');
  const store = openStore(storeOpts);
  try {
    await store.migrate();
    const users = new UsersRepository(store.knex, undefined);
    const conversations = new ConversationsRepository(store.knex);
    /** @type {Map<string, string>} */
    const ids = new Map();
    const now = Date.now();
    for (let i = 0; i < uids.length; i++) {
      const uid = /** @type {string} */ (uids[i]);
      await users.ensure(uid, now, true);
      const c = await conversations.create({
        userId: uid,
        status: 'in_progress',
        startedAt: new Date(now - segments * 4000).toISOString(),
        finishedAt: null,
        source: 'omi',
        language: 'en',
        segments: transcript(segments, i),
        now,
      });
      ids.set(uid, c.id);
      progress.update(i + 1);
    }
    return ids;
  } finally {
    await store.close();
  }
}

/**
 * Starts `n` operations, at most `inFlight` at once, and at `rate` per second when given.
 * @param {number} n
 * @param {number} inFlight
 * @param {number} rate 0: as fast as inFlight allows
 * @param {(i: number) => Promise<void>} op
 */
async function drive(n, inFlight, rate, op) {
  let next = 0;
  const t0 = performance.now();
  const lane = async () => {
    while (next < n) {
      const i = next++;
      if (rate > 0) {
        const wait = t0 + (i / rate) * 1000 - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      await op(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, lane));
}

/**
 * Times jobs from their start to their completion event on a Redis channel.
 */
class Completions {
  /** @type {Map<string, number>} */
  #started = new Map();
  hist = new Histogram();
  /** @type {Map<number, Histogram>} */
  #perSecond = new Map();
  completed = 0;
  lastAt = 0;
  t0 = 0;
  /** @type {(() => void) | undefined} */
  #whenDone;
  #expected = 0;

  /** @param {number} expected */
  begin(expected) {
    this.t0 = performance.now();
    this.#expected = expected;
  }

  /** @param {string} id */
  start(id) {
    this.#started.set(id, performance.now());
  }

  /** @param {string} id */
  done(id) {
    const at = this.#started.get(id);
    if (at === undefined) return;
    this.#started.delete(id);
    const now = performance.now();
    this.hist.record(now - at);
    const sec = Math.floor((now - this.t0) / 1000);
    if (!this.#perSecond.has(sec)) this.#perSecond.set(sec, new Histogram());
    this.#perSecond.get(sec)?.record(now - at);
    this.completed++;
    this.lastAt = now;
    if (this.completed >= this.#expected) this.#whenDone?.();
  }

  /** Resolves when every expected job completed, or after `timeoutMs`. */
  wait(/** @type {number} */ timeoutMs) {
    if (this.completed >= this.#expected) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#whenDone = () => {
        clearTimeout(timer);
        resolve(undefined);
      };
    });
  }

  /** @returns {{ perSecond: [number, number][], p95PerSecond: [number, number][] }} */
  series() {
    const secs = [...this.#perSecond.keys()].sort((a, b) => a - b);
    return {
      perSecond: secs.map((s) => [s, this.#perSecond.get(s)?.count ?? 0]),
      p95PerSecond: secs.map((s) => [s, this.#perSecond.get(s)?.summary().p95 ?? 0]),
    };
  }
}

/**
 * Subscribes to `channel` and hands each `memory_created` conversation id to `onCreated`.
 * @param {string} channel
 * @param {(id: string) => void} onCreated
 */
async function subscribe(channel, onCreated) {
  const sub = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  sub.on('message', (_ch, message) => {
    try {
      const e = JSON.parse(message);
      if (e?.type === 'memory_created' && typeof e.conversationId === 'string') onCreated(e.conversationId);
    } catch {
      // not an event of ours
    }
  });
  await sub.subscribe(channel);
  return sub;
}

/**
 * One target's figures from its completions and the CPU its processes spent meanwhile.
 * @param {{ name: string, what: string, jobs: number, c: Completions, refused: number, enqueuedAt: number, cpu: { worker: number, redis: number | null, llm: number | null }, rss: number[] }} a
 * @returns {TargetRun}
 */
function targetRun(a) {
  const { c } = a;
  const drainS = c.completed > 0 ? (c.lastAt - c.t0) / 1000 : 0;
  const perJob = (/** @type {number | null} */ s) => (s === null || c.completed === 0 ? null : Math.round((s * 1e6) / c.completed) / 1000);
  return {
    name: a.name,
    what: a.what,
    jobs: a.jobs,
    completed: c.completed,
    lost: a.jobs - a.refused - c.completed,
    refused: a.refused,
    enqueueS: Math.round((a.enqueuedAt - c.t0) / 10) / 100,
    drainS: Math.round(drainS * 100) / 100,
    jobsPerSec: drainS > 0 ? Math.round((c.completed / drainS) * 10) / 10 : 0,
    latency: c.hist.summary(),
    cpuMsPerJob: perJob(a.cpu.worker),
    redisCpuMsPerJob: perJob(a.cpu.redis),
    llmCpuMsPerJob: perJob(a.cpu.llm),
    rssMiB: a.rss.length ? median(a.rss) : null,
    ...c.series(),
  };
}

/** CPU seconds of `pid` so far (null without a pid). */
const cpuOf = (/** @type {number | undefined} */ pid) => (pid === undefined ? null : cpuSeconds(pid));

/**
 * Starts one of this bench's helper scripts and waits for its first line (it prints one once it is ready).
 * @param {string} script file name in bench/jobs/
 * @param {string[]} args
 */
async function spawnReady(script, args) {
  const proc = track(spawn(process.execPath, [path.join(BENCH_DIR, 'jobs', script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] }));
  await once(/** @type {import('node:stream').Readable} */ (proc.stdout), 'data');
  return { proc, pid: /** @type {number} */ (proc.pid), stop: async () => (proc.kill('SIGTERM'), (await once(proc, 'exit'))[0]) };
}

/**
 * The part both targets share: starts the `jobs` (`add`, false when refused) under the run's pacing, waits for their
 * completions, and reads what it cost meanwhile.
 * @param {{ label: string, c: Completions, jobs: number, inFlight: number, rate: number, timeoutS: number, add: (i: number) => Promise<boolean>, cpu: () => { worker: number, redis: number | null, llm: number | null }, sampler: ProcSampler, rssOf: string }} o
 */
async function measure(o) {
  const progress = new Progress(o.label, o.jobs);
  const ticker = setInterval(() => progress.update(o.c.completed, `${o.c.completed} done`), 250);
  const before = o.cpu();
  const rssFrom = o.sampler.samples.length;
  let refused = 0;
  o.c.begin(o.jobs);
  await drive(o.jobs, o.inFlight, o.rate, async (i) => {
    if (!(await o.add(i))) refused++;
  });
  const enqueuedAt = performance.now();
  await o.c.wait(o.timeoutS * 1000);
  clearInterval(ticker);
  progress.update(o.jobs);
  progress.end();
  const after = o.cpu();
  const spent = (/** @type {number | null} */ a, /** @type {number | null} */ b) => (a === null || b === null ? null : a - b);
  return {
    refused,
    enqueuedAt,
    cpu: { worker: after.worker - before.worker, redis: spent(after.redis, before.redis), llm: spent(after.llm, before.llm) },
    rss: o.sampler.samples.slice(rssFrom).map((s) => s.procs[o.rssOf]?.rssMiB ?? NaN).filter(Number.isFinite),
  };
}

/**
 * @param {Record<string, string | true>} options
 */
export async function run(options) {
  const smoke = options.smoke === true;
  const jobs = Number(options.jobs ?? (smoke ? 20 : 2000));
  const concurrency = Number(options.concurrency ?? 16);
  const llmMs = options['llm-ms'] === undefined ? null : Number(options['llm-ms']);
  const segments = Number(options.segments ?? (smoke ? 5 : 30));
  const inFlight = Number(options['in-flight'] ?? 32);
  const rate = Number(options.rate ?? 0);
  const timeoutS = Number(options.timeout ?? 300);
  const storeKind = String(options.store ?? 'sqlite');
  const jobNodes = Number(options['job-nodes'] ?? 0);
  const targets = String(options.targets ?? 'service,bare').split(',');
  const profileDir = options.profile === true ? path.join(RESULTS_DIR, 'profiles', new Date().toISOString().replace(/[:.]/g, '-')) : undefined;
  for (const [k, v] of Object.entries({ jobs, concurrency, segments, 'in-flight': inFlight, timeout: timeoutS })) {
    if (!Number.isInteger(v) || v <= 0) throw new Error(`--${k} must be a positive integer`);
  }
  if (llmMs !== null && !(llmMs >= 0)) throw new Error('--llm-ms must be a number of milliseconds ≥ 0');
  if (!(rate >= 0)) throw new Error('--rate must be ≥ 0');
  if (storeKind !== 'sqlite' && storeKind !== 'pg') throw new Error('--store must be sqlite or pg');
  if (!Number.isInteger(jobNodes) || jobNodes < 0) throw new Error('--job-nodes must be an integer ≥ 0');
  if (jobNodes > 0 && storeKind !== 'pg') throw new Error('--job-nodes needs --store pg: nodes share their store, and the embedded sqlite is one node\'s');
  if (!targets.every((t) => t === 'service' || t === 'bare')) throw new Error('--targets takes service and bare');
  const m = machine();

  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-jobs-'));
  const schema = `bench_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const store = storeKind === 'pg' ? { dataDir, databaseUrl: PG_URL, databaseSchema: schema } : { dataDir };
  const env = await serviceEnv(dataDir, {
    JOB_CONCURRENCY: String(concurrency),
    ...UNREACHED_RATE_LIMITS,
    ...(storeKind === 'pg' ? { DATABASE_URL: PG_URL, DATABASE_SCHEMA: schema } : {}),
  });
  const prefix = env.REDIS_PREFIX;
  const redis = redisPid();
  /** @type {{ stop(): Promise<number | null>, proc: import('node:child_process').ChildProcess }[]} */
  const children = [];
  /** @type {Redis[]} */
  const clients = [];
  /** @type {TargetRun[]} */
  const runs = [];
  const sampler = new ProcSampler(1000);
  let serviceExit = /** @type {number | null} */ (null);
  let checked = { read: 0, bad: 0 };
  try {
    const uids = Array.from({ length: jobs }, (_, i) => `bench-jobs-${i}`);
    /** @type {Map<string, string>} */
    let ids = new Map();
    if (targets.includes('service')) {
      const seeding = new Progress('jobs: seeding conversations', jobs);
      ids = await seed(store, uids, segments, seeding);
      seeding.end();
    }

    /** @type {number | undefined} */
    let llmPid;
    if (llmMs !== null && targets.includes('service')) {
      const port = await freePort();
      const llm = await spawnReady('llm-fake.mjs', ['--port', String(port), '--delay-ms', String(llmMs)]);
      children.push(llm);
      llmPid = llm.pid;
      Object.assign(env, { LLM_BASE_URL: `http://127.0.0.1:${port}/v1`, LLM_API_KEY: 'bench', LLM_MODEL: 'bench-model' });
      sampler.add('llm fake', llm.pid);
    }
    if (redis !== undefined) sampler.add('redis-server', redis);
    sampler.start();

    if (targets.includes('service')) {
      const service = await startChild({
        name: 'service',
        args: [...SERVICE_NODE_ARGS, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), 'dist/engine/index.js'],
        env: { ...env, ...(jobNodes > 0 ? { ROLE: 'api' } : {}) },
        port: Number(env.PORT),
        probePath: '/health',
      });
      children.push(service);
      const pid = /** @type {number} */ (service.proc.pid);
      sampler.add('service', pid);
      // Scaled out: the jobs run on nodes of their own (same store, same Redis prefix), as README's Scaling out says.
      const nodes = [service];
      for (let k = 1; k <= jobNodes; k++) {
        const port = await freePort();
        const node = await startChild({ name: `service (jobs node ${k})`, args: [...SERVICE_NODE_ARGS, 'dist/engine/index.js'], env: { ...env, ROLE: 'jobs', PORT: String(port) }, port, probePath: '/health' });
        children.push(node);
        nodes.push(node);
        sampler.add(`jobs node ${k}`, /** @type {number} */ (node.proc.pid));
      }
      const nodesCpu = () => nodes.reduce((s, n) => s + cpuSeconds(/** @type {number} */ (n.proc.pid)), 0);
      const tokens = await signTokens(env, uids, 3600);
      const c = new Completions();
      clients.push(await subscribe(`${prefix}:listen:events`, (id) => c.done(id)));
      const measured = await measure({
        label: 'jobs: service',
        c,
        jobs,
        inFlight,
        rate,
        timeoutS,
        sampler,
        rssOf: 'service',
        cpu: () => ({ worker: nodesCpu(), redis: cpuOf(redis), llm: cpuOf(llmPid) }),
        add: async (i) => {
          const id = /** @type {string} */ (ids.get(/** @type {string} */ (uids[i])));
          c.start(id);
          const res = await fetch(`${service.url}/v1/conversations`, { method: 'POST', headers: { authorization: `Bearer ${tokens[i]}`, 'content-type': 'application/json' }, body: '{}' });
          const body = /** @type {any} */ (await res.json().catch(() => undefined));
          return res.status === 200 && body?.memory?.id === id;
        },
      });
      runs.push(
        targetRun({
          name: 'service',
          what: `POST /v1/conversations → process-conversation job (${llmMs === null ? 'built-in processor' : `LLM processor, model answering in ${llmMs} ms`}, ${segments} segments${jobNodes > 0 ? `, on ${jobNodes} ROLE=jobs node${jobNodes > 1 ? 's' : ''}` : ''}) → memory_created`,
          jobs,
          c,
          ...measured,
        }),
      );
      // What a user reads back: a sample of the conversations, processed, with their structure.
      for (const i of Array.from({ length: Math.min(jobs, 20) }, (_, k) => Math.floor((k * jobs) / Math.min(jobs, 20)))) {
        const res = await fetch(`${service.url}/v1/dev/user/conversations/${ids.get(/** @type {string} */ (uids[i]))}`, { headers: { authorization: `Bearer ${tokens[i]}` } });
        const body = /** @type {any} */ (await res.json().catch(() => undefined));
        checked.read++;
        // The developer view has no status: an in-progress conversation has no title yet, a processed one has.
        if (res.status !== 200 || !(body?.structured?.title?.length > 0)) checked.bad++;
      }
      // The first non-zero exit among the nodes is the one reported.
      for (const n of nodes.reverse()) {
        const code = await n.stop();
        if (serviceExit === null || serviceExit === 0) serviceExit = code;
      }
      sampler.remove('service');
      for (let k = 1; k <= jobNodes; k++) sampler.remove(`jobs node ${k}`);
    }

    if (targets.includes('bare')) {
      const queueName = 'bare';
      const channel = `${prefix}:bare:events`;
      const bare = await spawnReady('bare-bullmq.mjs', ['--prefix', prefix, '--queue', queueName, '--channel', channel, '--concurrency', String(concurrency)]);
      children.push(bare);
      sampler.add('bare BullMQ worker', bare.pid);
      const connection = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
      clients.push(connection);
      const queue = new Queue(queueName, { connection, prefix });
      const c = new Completions();
      clients.push(await subscribe(channel, (id) => c.done(id)));
      const { PROCESS_JOB_OPTIONS } = await import(path.join(ROOT_DIR, 'dist/engine/jobs/queues.js'));
      const measured = await measure({
        label: 'jobs: bare BullMQ',
        c,
        jobs,
        inFlight,
        rate,
        timeoutS,
        sampler,
        rssOf: 'bare BullMQ worker',
        cpu: () => ({ worker: cpuSeconds(bare.pid), redis: cpuOf(redis), llm: null }),
        // The service's job options (engine/jobs/queues.ts).
        add: async (i) => {
          const id = `bare-${i}`;
          c.start(id);
          return queue.add('process-conversation', { conversationId: id, uid: uids[i] }, { ...PROCESS_JOB_OPTIONS, jobId: id }).then(
            () => true,
            () => false,
          );
        },
      });
      await queue.close();
      runs.push(targetRun({ name: 'bare', what: 'Queue.add → bare BullMQ worker whose job only publishes its id (baseline)', jobs, c, ...measured }));
    }
  } finally {
    sampler.stop();
    for (const c of clients) c.disconnect();
    for (const c of children.reverse()) await c.stop();
    await cleanRedis(prefix);
    rmSync(dataDir, { recursive: true, force: true });
    if (storeKind === 'pg') {
      const k = knexFactory({ client: 'pg', connection: PG_URL });
      await k.raw('drop schema if exists ?? cascade', [schema]).finally(() => k.destroy());
    }
  }

  // The main thread's profile (the largest file; worker threads write their own).
  const profiles = profileDir ? readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(profileDir, f)) : [];
  const prof = profiles.length ? summarize(profiles.sort((a, b) => statSync(b).size - statSync(a).size)[0] ?? '') : undefined;
  const result = jobsResult({ m, options: { jobs, concurrency, llmMs, segments, inFlight, rate, store: storeKind, jobNodes, targets, smoke, profile: Boolean(profileDir) }, runs, checked, serviceExit, sampler, prof });
  finish(/** @type {any} */ (result), options);
  const broken = runs.filter((r) => r.lost > 0 || r.refused > 0);
  if (broken.length > 0) throw new Error(`jobs were refused or lost (${broken.map((r) => `${r.name}: ${r.refused} refused, ${r.lost} lost`).join('; ')}): the figures are not valid`);
  if (checked.bad > 0) throw new Error(`${checked.bad} of ${checked.read} conversations read back had no structure (not processed)`);
  if (targets.includes('service') && serviceExit !== 0) throw new Error(`the service exited with ${serviceExit} on SIGTERM`);
  return result;
}

/**
 * The common result (lib/report.mjs) of a jobs run.
 * @param {{ m: ReturnType<typeof machine>, options: Record<string, unknown>, runs: TargetRun[], checked: { read: number, bad: number }, serviceExit: number | null, sampler: ProcSampler, prof: ReturnType<typeof summarize> | undefined }} a
 */
function jobsResult({ m, options, runs, checked, serviceExit, sampler, prof }) {
  const service = runs.find((r) => r.name === 'service');
  const bare = runs.find((r) => r.name === 'bare');
  const ratio = service && bare && bare.jobsPerSec > 0 ? Math.round((service.jobsPerSec / bare.jobsPerSec) * 1000) / 1000 : null;
  const lat = (/** @type {TargetRun} */ r) => `${r.latency.p50} / ${r.latency.p95} / ${r.latency.p99} / ${r.latency.max}`;
  const n = (/** @type {number | null} */ v) => (v === null ? '-' : String(v));
  const lost = runs.reduce((s, r) => s + r.lost, 0);
  return {
    scenario: 'jobs',
    version: 2,
    startedAt: new Date().toISOString(),
    machine: m,
    options,
    baseline: `bare: a BullMQ worker on the same Redis whose job only publishes its id, concurrency ${options.concurrency}, jobs added with the service's job options, ${options.inFlight} adds in flight`,
    summary: {
      head: ['target', 'jobs', 'processed', 'lost', 'jobs/s', 'end → processed p50 / p95 / p99 / max, ms', 'CPU ms per job', 'Redis CPU ms per job', 'RSS MiB', 'enqueued in s', 'what'],
      rows: runs.map((r) => [r.name, String(r.jobs), String(r.completed), String(r.lost + r.refused), String(r.jobsPerSec), lat(r), n(r.cpuMsPerJob), n(r.redisCpuMsPerJob), n(r.rssMiB), String(r.enqueueS), r.what]),
    },
    figures: figuresOf(
      Object.fromEntries([
        ...runs.flatMap((r) => [
          [`${r.name} jobs/s`, [r.jobsPerSec, 'jobs/s', 'higher']],
          [`${r.name} latency p50 ms`, [r.latency.p50, 'ms', 'lower']],
          [`${r.name} latency p99 ms`, [r.latency.p99, 'ms', 'lower']],
          [`${r.name} CPU ms per job`, [r.cpuMsPerJob, 'ms', 'lower']],
        ]),
        ['service / bare jobs/s', [ratio, '', 'higher']],
      ]),
    ),
    goals: [{ name: 'jobs lost or refused', target: '0', value: lost + runs.reduce((s, r) => s + r.refused, 0), met: runs.length > 0 && runs.every((r) => r.lost === 0 && r.refused === 0) }],
    notes: [
      'end → processed: from sending POST /v1/conversations (bare: Queue.add) to the memory_created event on Redis; the queue wait is included, so with every job ended at once it grows through the run',
      `CPU per job: the processes that ran the jobs (the service answers the end requests too; with --job-nodes every node) and redis-server over the target's whole run${options.llmMs === null ? '' : `; the LLM fake spent ${n(service?.llmCpuMsPerJob ?? null)} ms per job`}`,
      service ? `read back over REST: ${checked.read - checked.bad} of ${checked.read} sampled conversations processed (a title in their structure)` : undefined,
      service && ratio !== null ? `service ${service.jobsPerSec} jobs/s against the bare worker's ${bare?.jobsPerSec} (${ratio})` : undefined,
      'webhook delivery is not part of this bench yet (no webhook queue)',
    ].filter(Boolean),
    tables: prof
      ? [
          { title: 'service profile by area (main thread)', head: ['self ms', '%', 'area'], rows: prof.areas.map((a) => [String(a.selfMs), a.pct.toFixed(1), a.area]) },
          { title: 'service profile by function (main thread)', head: ['self ms', '%', 'function', 'where'], rows: prof.functions.map((f) => [String(f.selfMs), f.pct.toFixed(1), f.name, f.where]) },
        ]
      : [],
    charts: [
      { title: 'Jobs processed per second', yLabel: 'jobs', lines: runs.map((r) => ({ name: r.name, points: r.perSecond, dashed: r.name === 'bare' })) },
      { title: 'End → processed p95 of the jobs processed in each second', yLabel: 'ms', lines: runs.map((r) => ({ name: r.name, points: r.p95PerSecond, dashed: r.name === 'bare' })) },
      { title: 'CPU per process (both targets, one after the other)', yLabel: 'cores', lines: sampler.lines('cores') },
      { title: 'RSS per process', yLabel: 'MiB', lines: sampler.lines('rssMiB') },
    ],
    targets: Object.fromEntries(runs.map((r) => [r.name, r])),
    ratio,
    serviceExitCode: serviceExit,
  };
}
