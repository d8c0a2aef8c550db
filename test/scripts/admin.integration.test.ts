// The admin command, run as the compiled script in a child process against the running service's sqlite store.
import t from 'tap';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { freePort } from '../helpers/ports.js';

const ADMIN = fileURLToPath(new URL('../../scripts/admin.js', import.meta.url));

function admin(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // Only the service's own variables (and PATH): the child must not pick up the test runner's environment.
    execFile(process.execPath, [ADMIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('memory-access switches the readiness gate of one account', async (t) => {
  const s = await startService(t);
  const key = bearer(await s.devKey('alice', ['memories:read']));
  t.equal((await s.req('/v1/dev/user/memories', { headers: key })).status, 200, 'enabled by default');

  const off = await admin(s.env, ['memory-access', 'alice', 'off']);
  t.equal(off.code, 0, off.stderr);
  t.equal(off.stdout, 'memory access for alice: off\n');
  const refused = await s.req('/v1/dev/user/memories', { headers: key });
  t.equal(refused.status, 403);
  t.equal(refused.json.detail.code, 'developer_memory_access_not_ready');

  const on = await admin(s.env, ['memory-access', 'alice', 'on']);
  t.equal(on.code, 0, on.stderr);
  t.equal(on.stdout, 'memory access for alice: on\n');
  t.equal((await s.req('/v1/dev/user/memories', { headers: key })).status, 200);

  // An account the service has never seen gets a row with the flag set.
  t.equal((await admin(s.env, ['memory-access', 'dave', 'off'])).code, 0);
  t.match(await s.service.services.users.get('dave'), { id: 'dave', memoryAccessEnabled: false });
});

t.test('bad arguments print the usage and exit non-zero', async (t) => {
  const dir = t.testdir();
  for (const args of [[], ['memory-access'], ['memory-access', 'alice'], ['memory-access', 'alice', 'maybe'], ['memory-access', 'alice', 'on', 'extra'], ['bogus', 'alice', 'on']]) {
    const r = await admin({ DATA_DIR: dir }, args);
    t.equal(r.code, 2, args.join(' ') || '(none)');
    t.match(r.stderr, /^usage: npm run admin -- memory-access <uid> on\|off/);
    t.equal(r.stdout, '');
  }
});

t.test('without the Redis running nodes share, nothing changes (they would not hear of it)', async (t) => {
  const s = await startService(t);
  await s.service.services.users.setMemoryAccess('erin', true, s.clock.now());
  const port = await freePort();
  const r = await admin({ ...s.env, REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_EMBEDDED: 'never' }, ['memory-access', 'erin', 'off']);
  t.equal(r.code, 1);
  t.match(r.stderr, /^nothing changed: Redis does not answer/);
  t.match(await s.service.services.users.get('erin'), { memoryAccessEnabled: true });
});
