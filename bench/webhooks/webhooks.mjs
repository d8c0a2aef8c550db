// Macro bench of durable webhook delivery: conversation-created deliveries enqueued by the service's producer, sent
// by its worker to a local keep-alive receiver. Deliveries per second at full speed, and enqueue → receipt latency
// at a fixed rate. The service runs in this process (ROLE=all), the receiver in a child process.
import { fork, spawn } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT_DIR, figuresOf, finish, machine } from '../lib/report.mjs';
import { Histogram } from '../lib/histogram.mjs';
import { Redis } from 'ioredis';
import { cleanRedis, freePort, serviceEnv, track } from '../lib/processes.mjs';
import { bareSend } from './bare-sender.mjs';

/**
 * Commands served and CPU seconds spent by a redis-server so far (INFO commandstats and cpu).
 * @param {Redis} r
 */
async function redisTotals(r) {
  const info = await r.info('all');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) calls += Number(m[1]);
  const cpu = (/** @type {string} */ k) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return { calls, cpuS: cpu('used_cpu_user') + cpu('used_cpu_sys') };
}

export const USAGE = `npm run bench -- webhooks [--deliveries 5000] [--rate 200] [--latency-deliveries 2000] [--store sqlite|pg] [--smoke]
  --deliveries          deliveries enqueued as fast as the producer takes them, for deliveries/s (default 5000; 50 with --smoke)
  --rate                deliveries per second for the latency run (default 200)
  --latency-deliveries  deliveries of the latency run (default 2000; 50 with --smoke)
  --store               sqlite (default) or pg (PostgreSQL at 127.0.0.1:5432/test, a schema of its own)
  --profile FILE        writes a V8 CPU profile of the full-speed run (the service's process) to FILE
  --own-redis           runs a redis-server of its own (no persistence) and reports its commands and CPU per delivery
  --baseline            bare (default): the same number of signed POSTs sent with nothing else to the same receiver, 64
                        in flight, after the service's runs; none: skip it
  --out                 result file (default bench/results/<timestamp>-webhooks.json)`;

const RECEIVER = fileURLToPath(new URL('./receiver.mjs', import.meta.url));
const dist = (/** @type {string} */ p) => import(path.join(ROOT_DIR, 'dist', p));

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const smoke = options.smoke === true;
  const total = Number(options.deliveries ?? (smoke ? 50 : 5000));
  const rate = Number(options.rate ?? 200);
  const latencyN = Number(options['latency-deliveries'] ?? (smoke ? 50 : 2000));
  const pg = options.store === 'pg';
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-webhooks-'));
  const schema = `bench_${Date.now()}`;
  const ownRedisPort = options['own-redis'] === true ? await freePort() : undefined;
  const redisServer = ownRedisPort ? track(spawn('redis-server', ['--port', String(ownRedisPort), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })) : undefined;
  const redisUrl = ownRedisPort ? `redis://127.0.0.1:${ownRedisPort}` : undefined;
  if (redisUrl) {
    const probe = new Redis(redisUrl, { retryStrategy: () => 100 });
    await probe.ping();
    probe.disconnect();
  }
  const env = await serviceEnv(dataDir, { WEBHOOK_ALLOW_PRIVATE: 'on', ...(redisUrl ? { REDIS_URL: redisUrl } : {}), ...(pg ? { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test', DATABASE_SCHEMA: schema } : {}) });
  const { loadConfig } = await dist('engine/config.js');
  const { Service } = await dist('engine/app.js');
  const { createLogger } = await dist('engine/logger.js');
  const { webhookParts } = await dist('engine/webhooks/parts.js');

  const rx = track(fork(RECEIVER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
  /** @type {Map<string, number>} */
  const sentAt = new Map();
  /** @type {Map<string, number>} */
  const receivedAt = new Map();
  const port = await new Promise((resolve) => rx.once('message', (/** @type {any} */ m) => resolve(m.port)));
  rx.on('message', (/** @type {any} */ m) => {
    if (m.ids) for (const [id, at] of m.ids) receivedAt.set(id, at);
  });

  const config = loadConfig(env);
  const service = await Service.start({ config, logger: createLogger('warn') });
  const s = service.services;
  try {
    const users = 100;
    for (let u = 0; u < users; u++) await s.users.ensure(`u${u}`, Date.now(), true);
    for (let u = 0; u < users; u++) await webhookParts(s).webhooks.set(`u${u}`, 'memory_created', `http://127.0.0.1:${port}/hook`, null, Date.now());
    const seedConversations = async (/** @type {number} */ n) => {
      const out = [];
      for (let i = 0; i < n; i++) {
        const uid = `u${i % users}`;
        const now = Date.now();
        const c = await s.conversations.create({ userId: uid, status: 'completed', startedAt: new Date(now - 60_000).toISOString(), finishedAt: new Date(now).toISOString(), source: 'omi', language: 'en',
          segments: Array.from({ length: 10 }, (_, k) => ({ text: `segment ${k} of a conversation about the quarterly plan and the offsite`, start: k * 4, end: k * 4 + 3.8, speaker: `SPEAKER_0${k % 2}`, speakerId: k % 2, isUser: k % 2 === 0 })), now });
        out.push({ uid, id: c.id });
      }
      return out;
    };
    const enqueue = async (/** @type {{uid: string, id: string}} */ c) => {
      const t = performance.now() + performance.timeOrigin;
      const [d] = await s.webhookQueue.enqueueConversationCreated(c.uid, c.id, { reprocess: false, discarded: false });
      sentAt.set(d.id, t);
    };
    const waitAll = async (/** @type {number} */ n, /** @type {number} */ timeoutMs) => {
      const until = Date.now() + timeoutMs;
      while (receivedAt.size < n && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    };
    /** Runs `send` (which sends `total`), waits for the receiver to see them all; what arrived, per second and CPU. */
    const throughput = async (/** @type {() => Promise<unknown>} */ send, /** @type {number} */ timeoutMs) => {
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      await send();
      await waitAll(total, timeoutMs);
      const cpu = process.cpuUsage(cpu0);
      const received = receivedAt.size;
      return { received, perSec: received / ((performance.now() - t0) / 1000), cpuMsPer: (cpu.user + cpu.system) / 1000 / Math.max(received, 1) };
    };

    // Throughput: everything enqueued at once (64 in flight), until the receiver has seen each.
    const batch = await seedConversations(total);
    const profiler = typeof options.profile === 'string' ? new Session() : undefined;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    }
    const redisStats = redisUrl ? new Redis(redisUrl) : undefined;
    const redis0 = redisStats ? await redisTotals(redisStats) : undefined;
    let next = 0;
    const full = await throughput(async () => {
      await Promise.all(Array.from({ length: 64 }, async () => {
        while (next < batch.length) await enqueue(/** @type {any} */ (batch[next++]));
      }));
    }, 600_000);
    const { perSec, cpuMsPer } = full;
    const redis1 = redisStats && redis0 ? await redisTotals(redisStats) : undefined;
    redisStats?.disconnect();
    const redisPer = redis0 && redis1 ? { commands: (redis1.calls - redis0.calls - 1) / receivedAt.size, cpuMs: ((redis1.cpuS - redis0.cpuS) * 1000) / receivedAt.size } : undefined;
    if (profiler) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(/** @type {string} */ (options.profile), JSON.stringify(profile));
      profiler.disconnect();
    }

    // Latency at a fixed rate.
    receivedAt.clear();
    sentAt.clear();
    const paced = await seedConversations(latencyN);
    const start = performance.now();
    const pending = [];
    for (let i = 0; i < paced.length; i++) {
      const wait = start + (i / rate) * 1000 - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      pending.push(enqueue(/** @type {any} */ (paced[i])));
    }
    await Promise.all(pending);
    await waitAll(latencyN, 120_000);
    const latencyReceived = receivedAt.size;
    const hist = new Histogram();
    for (const [id, at] of receivedAt) {
      const t = sentAt.get(id);
      if (t !== undefined) hist.record(at - t);
    }
    const lat = hist.summary();

    // Baseline: sending alone, in this process while the service idles, to the same receiver.
    receivedAt.clear();
    const bare = options.baseline === 'none' ? undefined : await throughput(() => bareSend({ port, total, inFlight: 64 }), 120_000);
    const result = {
      scenario: 'webhooks',
      version: 2,
      startedAt: new Date().toISOString(),
      machine: machine(),
      options: { total, rate, latencyN, store: pg ? 'pg' : 'sqlite' },
      baseline: bare ? 'bare sender: the same signed POSTs to the same receiver with no store, queue or retry state' : 'none: the absolute deliveries/s and latency',
      summary: {
        head: ['run', 'deliveries', 'received', 'deliveries/s', 'CPU ms/delivery', 'p50 ms', 'p99 ms'],
        rows: [
          ['full speed', String(total), String(full.received), perSec.toFixed(0), cpuMsPer.toFixed(2), '', ''],
          [`${rate}/s`, String(latencyN), String(latencyReceived), '', '', String(lat.p50), String(lat.p99)],
          ...(bare ? [['bare sender', String(total), String(bare.received), bare.perSec.toFixed(0), bare.cpuMsPer.toFixed(2), '', '']] : []),
        ],
      },
      figures: figuresOf({ 'deliveries/s': [perSec, '/s', 'higher'], 'CPU per delivery': [cpuMsPer, 'ms', 'lower'], 'p99 enqueue to receipt': [lat.p99, 'ms', 'lower'] }),
      goals: [{ name: 'deliveries/s', target: '≥ 5000', value: Math.round(perSec), met: perSec >= 5000 }],
      notes: [
        'service (ROLE=all, one process) and producer in the bench process; the receiver in a child process, keep-alive, answering 200',
        ...(bare ? [`durable delivery against sending alone: ${(bare.perSec / perSec).toFixed(1)}× fewer deliveries/s, ${(cpuMsPer / bare.cpuMsPer).toFixed(1)}× the CPU per delivery`] : []),
        ...(redisPer ? [`Redis of its own, full-speed run: ${redisPer.commands.toFixed(1)} commands and ${redisPer.cpuMs.toFixed(3)} ms of redis-server CPU per delivery`] : []),
      ],
    };
    finish(/** @type {any} */ (result), options);
  } finally {
    await service.stop().catch(() => undefined);
    rx.kill();
    if (redisServer) redisServer.kill();
    else await cleanRedis(env.REDIS_PREFIX);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
