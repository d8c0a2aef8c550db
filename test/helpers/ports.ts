// Loopback ports for tests: one where nothing listens, whether something answers on one, and a redis-server of the
// test's own on one (to kill and start again).
import net from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { until } from './until.js';

/** A port on 127.0.0.1 that was free a moment ago: nothing listens there until the test starts something. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether a TCP connection to 127.0.0.1:`port` is accepted. */
export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

/**
 * A redis-server on `port`; the caller kills it (SIGKILL) or leaves it to its teardown. It keeps nothing on disk unless
 * `aofDir` is given: then every write is in its append-only file there before it is acknowledged (appendfsync
 * always), so a server killed and started again on the same directory has every acknowledged write.
 */
export function startRedisServer(port: number, aofDir?: string): ChildProcess {
  const persistence = aofDir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', aofDir] : ['--appendonly', 'no'];
  return spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], { stdio: 'ignore' });
}

/** A redis-server of the test's own that keeps every acknowledged write in an append-only file, to kill and start again. */
export interface PersistentRedis {
  readonly port: number;
  readonly url: string;
  /** SIGKILL; resolves once the process has exited. */
  kill(): Promise<void>;
  /** Starts it again on the same file; resolves once it accepts connections. */
  start(): Promise<void>;
  /** SIGSTOP: its connections stay open and nothing answers, as with a hung process or a network dropping packets. */
  freeze(): void;
  /** SIGCONT after freeze(). */
  thaw(): void;
}

/** Starts a {@link PersistentRedis}; the test's teardown kills it and removes its directory. */
export async function persistentRedis(t: Test): Promise<PersistentRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'redis-aof-'));
  let redis: ChildProcess | undefined;
  t.teardown(() => {
    redis?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const r: PersistentRedis = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async kill() {
      const p = redis;
      if (!p || p.exitCode !== null) return;
      const exited = new Promise((resolve) => p.once('exit', resolve));
      p.kill('SIGKILL');
      await exited;
    },
    async start() {
      redis = startRedisServer(port, dir);
      await until(() => portAnswers(port), { what: 'redis-server listening on its append-only file' });
    },
    freeze() {
      redis?.kill('SIGSTOP');
    },
    thaw() {
      redis?.kill('SIGCONT');
    },
  };
  await r.start();
  return r;
}
