// The real entry point as an operator runs it: start on PORT=0, /health, SIGTERM, bad config, embedded Redis, the token command.
import { onJsonLines } from '../helpers/json-lines.js';
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { request, bearer } from '../helpers/http.js';
import { freePort, portAnswers } from '../helpers/ports.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENTRY = fileURLToPath(new URL('../../engine/index.js', import.meta.url));
const TOKEN = fileURLToPath(new URL('../../scripts/token.js', import.meta.url));
const ADMIN = fileURLToPath(new URL('../../scripts/admin.js', import.meta.url));

interface Running {
  child: ChildProcess;
  port: number;
  lines: Record<string, unknown>[];
  exited: Promise<number | null>;
}

function run(env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, [ENTRY], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    onJsonLines(child.stdout!, (line) => {
      lines.push(line);
      if (line.msg === 'listening') resolve({ child, port: line.port as number, lines, exited });
    });
    void exited.then((code) => reject(new Error(`exited with ${code} before listening`)));
  });
}

const baseEnv = (t: { testdir(): string }): Record<string, string> => ({
  HOST: '127.0.0.1',
  PORT: '0',
  DATA_DIR: t.testdir(),
  REDIS_PREFIX: `test-${randomUUID()}`,
  LOG_LEVEL: 'info',
});

t.test('starts, answers /health and stops cleanly on SIGTERM', async (t) => {
  const env = baseEnv(t);
  const started = Date.now();
  const svc = await run(env);
  t.ok(svc.port > 0, 'PORT=0 picked a port and logged it');
  const health = await request(`http://127.0.0.1:${svc.port}`, '/health');
  t.equal(health.status, 200);
  t.same(health.json, { status: 'ok', checks: { store: 'ok', redis: 'ok' } });
  t.comment(`time to healthy: ${Date.now() - started} ms`);

  const metrics = await request(`http://127.0.0.1:${svc.port}`, '/metrics');
  t.equal(metrics.status, 200);
  t.match(metrics.headers['content-type'], /text\/plain/);
  t.match(metrics.text, /http_requests_total\{method="get",route="\/health",status="200"\} 1/);
  t.match(metrics.text, /process_resident_memory_bytes \d+/);
  // Codec threads start with the first session: an idle node reports no codec thread heap.
  t.notMatch(metrics.text, /codec_thread_heap_bytes\{shard=/, 'no codec thread before the first session');

  const token = spawnSync(process.execPath, [TOKEN, 'op-user'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', DATA_DIR: env.DATA_DIR! }, encoding: 'utf8' });
  t.equal(token.status, 0);
  const lines = token.stdout.split('\n').filter(Boolean);
  t.equal(lines.length, 1, 'the token command prints one line');
  const keys = await request(`http://127.0.0.1:${svc.port}`, '/v1/dev/keys', { headers: bearer(lines[0]!) });
  t.equal(keys.status, 200, 'and the service accepts that token');

  svc.child.kill('SIGTERM');
  t.equal(await svc.exited, 0, 'exit 0 after SIGTERM');
  t.ok(svc.lines.some((l) => l.msg === 'stopped'));
  t.notOk(await portAnswers(svc.port), 'the port is released');
  const text = JSON.stringify(svc.lines);
  t.notOk(text.includes(lines[0]!), 'no token in the logs');
});

t.test('a bad variable stops start-up and is named', async (t) => {
  const res = spawnSync(process.execPath, [ENTRY], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...baseEnv(t), PORT: 'http' }, encoding: 'utf8' });
  t.equal(res.status, 2);
  t.match(res.stderr, /^configuration error: PORT: /, 'the variable is named');
});

t.test('with nothing at REDIS_URL it runs its own redis-server and stops it on shutdown', async (t) => {
  const dead = await freePort();
  const runEnv: Record<string, string> = { ...baseEnv(t), REDIS_URL: `redis://127.0.0.1:${dead}` };
  const svc = await run(runEnv);
  const started = svc.lines.find((l) => l.msg === 'embedded redis-server started');
  t.ok(started, 'an embedded redis-server was started');
  const redisPort = started!.port as number;
  t.ok(await portAnswers(redisPort));
  const health = await request(`http://127.0.0.1:${svc.port}`, '/health');
  t.equal(health.status, 200);

  // The admin command finds the embedded server, so the running service hears of a gate change at once.
  const token = spawnSync(process.execPath, [TOKEN, 'op-user'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', DATA_DIR: runEnv.DATA_DIR! }, encoding: 'utf8' }).stdout.trim();
  const base = `http://127.0.0.1:${svc.port}`;
  const key = (await request(base, '/v1/dev/keys', { method: 'POST', headers: bearer(token), body: { name: 'k', scopes: ['memories:read'] } })).json.key as string;
  for (let i = 0; i < 2; i++) t.equal((await request(base, '/v1/dev/user/memories', { headers: bearer(key) })).status, 200, 'gate and answer remembered');
  const admin = spawnSync(process.execPath, [ADMIN, 'memory-access', 'op-user', 'off'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...runEnv }, encoding: 'utf8' });
  t.equal(admin.status, 0, admin.stderr);
  t.equal(admin.stderr, '', 'it found the embedded Redis');
  t.equal((await request(base, '/v1/dev/user/memories', { headers: bearer(key) })).status, 403, 'refused at once');

  svc.child.kill('SIGTERM');
  t.equal(await svc.exited, 0);
  t.notOk(await portAnswers(redisPort), 'the embedded redis-server is stopped');
});

t.test('REDIS_EMBEDDED=never with nothing at REDIS_URL refuses to start', async (t) => {
  const res = spawnSync(process.execPath, [ENTRY], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...baseEnv(t), REDIS_URL: 'redis://127.0.0.1:1', REDIS_EMBEDDED: 'never' },
    encoding: 'utf8',
  });
  t.equal(res.status, 1);
  t.match(res.stdout, /ENG_ERR_BOOT_REDIS_UNAVAILABLE/);
});
