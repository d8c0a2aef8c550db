// Child processes of a bench: the real service (dist/engine/index.js) and the bare uWS baseline, started, probed and stopped.
import { spawn, execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { createWriteStream, readFileSync, readdirSync, readlinkSync } from 'node:fs';
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

/** The port asked for was taken by another process meanwhile (freePort() released it before the child bound it). */
class PortTaken extends Error {}

/**
 * Inodes of the sockets listening on `port` (any address), from /proc/net; undefined where /proc cannot say (not Linux).
 * @param {number} port
 * @returns {Set<string> | undefined}
 */
function listeners(port) {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const found = new Set();
  try {
    for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
        const f = line.trim().split(/\s+/);
        // local_address is ADDR:PORT in hex; state 0A is LISTEN; the inode is the tenth field.
        if (f.length > 9 && f[1]?.endsWith(`:${hex}`) && f[3] === '0A') found.add(f[9]);
      }
    }
  } catch {
    return undefined;
  }
  return found;
}

/**
 * Who listens on `port`: `pid` alone, `pid` and another process (a service started with SO_REUSEPORT shares a port
 * another one holds, and the bench would then measure both), only others, or unknown where /proc cannot say.
 * @param {number} pid
 * @param {number} port
 * @returns {'alone' | 'shared' | 'others' | 'unknown'}
 */
function portOwners(pid, port) {
  const inodes = listeners(port);
  if (inodes === undefined) return 'unknown';
  const own = new Set();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) own.add(m[1]);
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    return 'unknown';
  }
  const mine = [...inodes].filter((i) => own.has(i)).length;
  if (mine === 0) return 'others';
  return mine === inodes.size ? 'alone' : 'shared';
}

/**
 * Starts `node <args>` and waits until `GET <probePath>` answers 200 from it. When the port turns out to be taken by
 * another process (a test or bench running beside this one got it from the kernel after freePort() released it) and
 * `env.PORT` names it, the child is started again on a new port (`o.port` and `o.env.PORT` then say which).
 * @param {{ args: string[], env: Record<string, string>, port: number, probePath: string, name: string, timeoutMs?: number }} o
 * @returns {Promise<Child>}
 */
export async function startChild(o) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(o);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt >= 3 || o.env.PORT !== String(o.port)) throw err;
      o.port = await freePort();
      o.env.PORT = String(o.port);
    }
  }
}

/**
 * @param {{ args: string[], env: Record<string, string>, port: number, probePath: string, name: string, timeoutMs?: number }} o
 * @returns {Promise<Child>}
 */
async function startOnce(o) {
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
    if (proc.exitCode !== null) {
      const taken = /could not listen|EADDRINUSE|address already in use/i.test(out) || (listeners(o.port)?.size ?? 0) > 0;
      const message = `${o.name} exited with ${proc.exitCode} before answering:\n${out}`;
      throw taken ? new PortTaken(message) : new Error(message);
    }
    try {
      const res = await fetch(url + o.probePath);
      await res.arrayBuffer();
      // An answer from another process on the port does not count: the child then fails to bind it, or shares it.
      if (res.status === 200 && proc.pid !== undefined) {
        const owners = portOwners(proc.pid, o.port);
        if (owners === 'alone' || owners === 'unknown') break;
        if (owners === 'shared') {
          proc.kill('SIGKILL');
          await once(proc, 'exit');
          throw new PortTaken(`${o.name}: port ${o.port} is shared with another process`);
        }
      }
    } catch (err) {
      if (err instanceof PortTaken) throw err;
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
