// Several listen processes on one host share one port (SO_REUSEPORT, which uSockets sets unless asked for an
// exclusive port): the kernel spreads new connections among them, a node that shuts down leaves the port to the
// others, and a port held by a program that did not ask to share it stops start-up.
import t from 'tap';
import { cpSync, existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../engine/config.js';
import { systemClock } from '../../engine/clock.js';
import { LocalIssuer } from '../../engine/identity/id-tokens.js';
import { startFakeDeepgram } from '../fakes/deepgram-server.js';
import { openSession, processEnv, startNode, type NodeProcess } from '../helpers/multi-node.js';
import { freePort } from '../helpers/ports.js';
import { waitFor } from '../helpers/until.js';

t.test('two listen processes on one port both take sessions; a draining one leaves the port to the other', async (t) => {
  const provider = await startFakeDeepgram({ fallback: { kind: 'accept', autoEveryS: 1 }, sweepEveryMs: 0 });
  t.teardown(() => provider.close());
  const port = await freePort();
  const root = t.testdir();
  // Each node its own DATA_DIR: an ack=enabled session's audio log says which process took it.
  const dirs = [path.join(root, 'a'), path.join(root, 'b')];
  const env: Record<string, string> = { ...processEnv(t, process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', provider), PORT: String(port) };
  const config = loadConfig({ ...env, DATA_DIR: dirs[0]! });
  const issuer = await LocalIssuer.open(dirs[0]!, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: 0, clock: systemClock });
  cpSync(path.join(dirs[0]!, 'identity'), path.join(dirs[1]!, 'identity'), { recursive: true });
  // One after the other: the first runs the migrations.
  const a = await startNode(t, 'listen-a', 'listen', { ...env, DATA_DIR: dirs[0]! });
  const b = await startNode(t, 'listen-b', 'listen', { ...env, DATA_DIR: dirs[1]! });
  t.equal(a.port, port);
  t.equal(b.port, port, 'both listen on the same port');

  let n = 0;
  /** Opens an acknowledged session on the shared port; answers which node holds it (by its audio log). */
  const session = async (): Promise<{ node: number; close: () => void }> => {
    const uid = `rp-${n++}`;
    const c = await openSession(port, await issuer.sign(uid, 600), { uid, codec: 'opus', sample_rate: '16000', ack: 'enabled' });
    const id = (await c.json((m) => m.type === 'audio_session', 30_000)).session_id as string;
    await c.ready();
    const node = await waitFor(() => {
      const i = dirs.findIndex((d) => existsSync(path.join(d, 'audio-log', 'sessions', `${id}.jsonl`)));
      return i >= 0 ? i : undefined;
    }, { what: `the audio log of ${id}`, timeoutMs: 20_000 });
    return { node, close: () => c.close() };
  };

  const took = [0, 0];
  const open: (() => void)[] = [];
  // Each connection comes from a new source port: the kernel's hash sends about half to each process.
  while ((took[0] === 0 || took[1] === 0) && n < 40) {
    const s = await session();
    took[s.node]!++;
    open.push(s.close);
  }
  t.ok(took[0]! > 0 && took[1]! > 0, `both processes took sessions (${took[0]} and ${took[1]} of ${n})`);
  for (const close of open) close();

  // A draining node closes its listen socket first: every new connection goes to the other one.
  a.child.kill('SIGTERM');
  t.equal(await a.exited, 0, 'the first node drained and exited 0');
  const after = [];
  for (let i = 0; i < 6; i++) after.push((await session()).node);
  t.same(after, [1, 1, 1, 1, 1, 1], 'with one process left on the port, it takes every session');
  b.child.kill('SIGTERM');
  t.equal(await b.exited, 0);
});

t.test('a port held by a program that does not share it: start-up fails and says so', async (t) => {
  const holder = net.createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => holder.close(() => r())));
  const port = (holder.address() as net.AddressInfo).port;
  const node: Promise<NodeProcess> = startNode(t, 'listen', 'listen', {
    HOST: '127.0.0.1',
    PORT: String(port),
    DATA_DIR: t.testdir(),
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `test-${randomUUID()}`,
    REDIS_EMBEDDED: 'never',
    LOG_LEVEL: 'info',
    CODEC_THREADS: '1',
  });
  await t.rejects(node, /^(?=.*exited with 1 before listening)(?=.*"start-up failed")(?=.*could not listen on 127\.0\.0\.1:\d+)/, "the process exits 1, logging that it could not listen");
});
