// A three-master Redis Cluster on loopback for tests: real redis-server processes with cluster mode on, their slots
// split in three, in a directory of their own that stop() removes.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';

export interface TestCluster {
  /** REDIS_URL of the cluster: redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/ */
  readonly url: string;
  /** The masters' client ports. */
  readonly ports: readonly number[];
  /** Keys held by each master, in the order of `ports`. */
  keysPerNode(): Promise<number[]>;
  stop(): Promise<void>;
}

const SLOTS = 16384;
const READY_TIMEOUT_MS = 20_000;

async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`redis cluster: ${what} within ${READY_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts three masters, gives each a third of the slots, introduces them and waits until every one says cluster_state:ok. */
export async function startRedisCluster(masters = 3): Promise<TestCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-cluster-'));
  const children: ChildProcess[] = [];
  const clients: Redis[] = [];
  const ports: number[] = [];
  const busPorts: number[] = [];
  const stop = async (): Promise<void> => {
    for (const c of clients) c.disconnect();
    await Promise.all(
      children.map((c) => (c.exitCode !== null || c.signalCode !== null ? undefined : new Promise<void>((r) => {
        c.once('exit', () => r());
        c.kill('SIGKILL');
      }))),
    );
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      // A cluster node listens on a second port for its peers: both are picked, as --port 0 is refused in cluster mode.
      const port = await freePort();
      const busPort = await freePort();
      const nodeDir = path.join(dir, String(port));
      fs.mkdirSync(nodeDir);
      children.push(spawn('redis-server', [
        '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1', '--dir', nodeDir,
        '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000',
        '--save', '', '--appendonly', 'no', '--loglevel', 'warning',
      ], { stdio: 'ignore' }));
      ports.push(port);
      busPorts.push(busPort);
      clients.push(new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 200 }));
    }
    for (const c of clients) c.on('error', () => undefined);
    await Promise.all(clients.map((c) => waitFor('a node answers', async () => (await c.ping()) === 'PONG')));
    await Promise.all(clients.map((c, i) => c.call('CLUSTER', 'ADDSLOTSRANGE', String(Math.floor((SLOTS * i) / masters)), String(Math.floor((SLOTS * (i + 1)) / masters) - 1))));
    await Promise.all(clients.slice(1).map((c) => c.call('CLUSTER', 'MEET', '127.0.0.1', String(ports[0]), String(busPorts[0]))));
    await Promise.all(clients.map((c) => waitFor('cluster_state:ok', async () => String(await c.call('CLUSTER', 'INFO')).includes('cluster_state:ok'))));
    // Every node must know every other's slots before a client's first CLUSTER SLOTS, or it is sent MOVED in circles.
    await Promise.all(clients.map((c) => waitFor('all slots known', async () => ((await c.call('CLUSTER', 'SLOTS')) as unknown[]).length === masters)));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}/`,
    ports,
    keysPerNode: () => Promise.all(clients.map(async (c) => Number(await c.dbsize()))),
    stop,
  };
}
