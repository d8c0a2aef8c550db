// At least once across a crash: a jobs process killed while a receiver holds its delivery; another jobs process sends
// it again, same webhook-id, same body.
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startService, type TestService } from '../../helpers/service.js';
import { until, waitFor } from '../../helpers/until.js';
import { receiver, secretOf, verified, LINES } from '../../helpers/webhooks.js';
import { ConversationStatus } from '../../../engine/protocol.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const NODE = fileURLToPath(new URL('../../helpers/webhook-jobs-node.js', import.meta.url));

function jobsProcess(t: Test, api: TestService): Promise<ChildProcess> {
  const child = spawn(process.execPath, [NODE], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...api.env, ROLE: 'jobs', LOG_LEVEL: 'silent' }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void child.kill('SIGKILL'));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => d.toString().includes('"listening"') && resolve(child));
    child.on('exit', (code) => reject(new Error(`jobs process exited with ${code} before listening`)));
  });
}

t.test('a jobs process killed mid-delivery: another one delivers it again under the same webhook-id', async (t) => {
  const api = await startService(t, { store: 'pg', env: { ROLE: 'api', WEBHOOK_ALLOW_PRIVATE: 'on' } });
  const rx = await receiver(t, (_q, res, n) => (n === 1 ? undefined : res.end('{}'))); // holds the first
  const { conversations, users, webhookQueue } = api.service.services;
  await users.ensure('u1', api.clock.now(), true);
  const c = await conversations.create({ userId: 'u1', status: ConversationStatus.COMPLETED, startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), source: 'omi', language: 'en', segments: LINES, now: api.clock.now() });
  await api.req('/v1/users/developer/webhook/memory_created', { method: 'POST', headers: { authorization: `Bearer ${await api.token('u1')}` }, body: { url: rx.url } });

  const first = await jobsProcess(t, api);
  const [d] = await webhookQueue.enqueueConversationCreated('u1', c.id, { reprocess: false, discarded: false });
  await until(() => rx.received.length === 1, { what: 'the first attempt held by the receiver', timeoutMs: 20_000 });
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));

  await jobsProcess(t, api);
  await until(() => rx.received.length === 2, { what: 'the delivery sent again', timeoutMs: 30_000 });
  const [a, b] = rx.received as [typeof rx.received[0], typeof rx.received[0]];
  t.equal(a.headers['webhook-id'], d!.id);
  t.equal(b.headers['webhook-id'], d!.id, 'the same webhook-id');
  t.same(b.body, a.body, 'the same body');
  t.equal(verified(b, await secretOf(api, 'user', 'u1')).id, c.id);
  const row = await waitFor(async () => {
    const r = await webhookQueue.deliveries.get(d!.id);
    return r?.state === 'delivered' ? r : undefined;
  }, { what: 'recorded delivered' });
  t.equal(row.attempts, 1, 'the attempt cut short was never recorded; the one that answered is');
});
