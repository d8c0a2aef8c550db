// Child processes of a bench: the real service (dist/engine/index.js) and the bare uWS baseline, started, probed and stopped.
import { spawn, execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import { Redis } from 'ioredis';
import { ROOT_DIR } from './report.mjs';

const execFileP = promisify(execFile);

/** Every child a bench started and has not seen exit: killed when the bench itself exits or is interrupted. */
const live = new Set();

/**
 * Registers `proc` so it does not outlive the bench (Ctrl-C, a crash).
 * @template {import('node:child_process').ChildProcess} P
 * @param {P} proc
 * @returns {P}
 */
export function track(proc) {
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
  return proc;
}

/** SIGTERM to every tracked child (the service drains, the fakes close); called on exit and on SIGINT/SIGTERM. */
export function killChildren() {
  for (const p of live) if (p.exitCode === null) p.kill('SIGTERM');
}

/**
 * The service's environment in every bench: loopback on a free port, `dataDir`, the local Redis under a fresh prefix
 * (`cleanRedis(env.REDIS_PREFIX)` deletes what the run left), warnings only; `more` adds or overrides.
 * @param {string} dataDir
 * @param {Record<string, string>} [more]
 * @returns {Promise<Record<string, string> & { PORT: string, REDIS_PREFIX: string }>}
 */
export async function serviceEnv(dataDir, more = {}) {
  return {
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    DATA_DIR: dataDir,
    REDIS_URL: 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `bench-${randomUUID()}`,
    REDIS_EMBEDDED: 'never',
    LOG_LEVEL: 'warn',
    ...more,
  };
}

/**
 * Rate limits that stay on (every request pays the Redis round trip) but are never hit: 10^7 is the largest
 * RATE_LIMIT_PER_MINUTE the config accepts.
 */
export const UNREACHED_RATE_LIMITS = { RATE_LIMIT_PER_MINUTE: '10000000', RATE_LIMIT_PER_DAY: '1000000000' };

/** A free TCP port on 127.0.0.1; the service logs its port only at info level, and the bench runs it at warn. */
export async function freePort() {
  const srv = createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const addr = srv.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  srv.close();
  await once(srv, 'close');
  return port;
}

/**
 * @typedef {object} Child
 * @property {import('node:child_process').ChildProcess} proc
 * @property {string} url
 * @property {() => string} output stderr and stdout so far (for error messages).
 * @property {() => Promise<number | null>} stop SIGTERM, then SIGKILL after 10 s; resolves to the exit code.
 */

/**
 * Starts `node <args>` and waits until `GET <probePath>` answers 200.
 * @param {{ args: string[], env: Record<string, string>, port: number, probePath: string, name: string, timeoutMs?: number }} o
 * @returns {Promise<Child>}
 */
export async function startChild(o) {
  const proc = track(spawn(process.execPath, o.args, { cwd: ROOT_DIR, env: { ...process.env, ...o.env }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  const keep = (/** @type {Buffer} */ b) => {
    out = (out + b.toString()).slice(-8000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  // BENCH_SERVICE_OUTPUT=<file>: the service's whole output there too (e.g. with BENCH_SERVICE_NODE_ARGS=--trace-gc).
  const copyTo = o.name === 'service' ? process.env.BENCH_SERVICE_OUTPUT : undefined;
  if (copyTo) {
    const file = createWriteStream(copyTo, { flags: 'a' });
    proc.stdout?.pipe(file);
    proc.stderr?.pipe(file);
  }
  const url = `http://127.0.0.1:${o.port}`;
  const deadline = Date.now() + (o.timeoutMs ?? 30_000);
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${o.name} exited with ${proc.exitCode} before answering:\n${out}`);
    try {
      const res = await fetch(url + o.probePath);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${o.name} did not answer ${o.probePath} within ${o.timeoutMs ?? 30_000} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    proc,
    url,
    output: () => out,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      return proc.exitCode;
    },
  };
}

/**
 * An ID token for `uid` from the local issuer in `env.DATA_DIR`, as test/helpers/service.ts gets one.
 * @param {string} uid
 * @param {Record<string, string>} env
 */
export async function idToken(uid, env) {
  const { stdout } = await execFileP(process.execPath, [path.join(ROOT_DIR, 'dist/scripts/token.js'), uid], { cwd: ROOT_DIR, env: { ...process.env, ...env } });
  return stdout.trim();
}

/**
 * Deletes every key under the bench's Redis prefix (rate limits, queues, events), so runs leave the shared Redis as they found it.
 * @param {string} prefix
 */
export async function cleanRedis(prefix) {
  const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } catch {
    // Best effort: the keys expire within a day anyway.
  } finally {
    redis.disconnect();
  }
}
