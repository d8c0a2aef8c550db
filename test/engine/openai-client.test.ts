// The OpenAI SDK is loaded by a model's first request, not by the modules that may send one: a node without
// LLM_BASE_URL never pays for it.
import t from 'tap';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const HOOKS = new URL('../helpers/resolve-log.js', import.meta.url);
const ENGINE = new URL('../../engine/', import.meta.url).href;

t.test('every role’s modules load without the SDK; a client’s first use loads it', async (t) => {
  const log = join(t.testdir(), 'resolved');
  const script = `
    import { writeFileSync } from 'node:fs';
    for (const m of ['app.js', 'node/api.js', 'node/listen.js', 'node/jobs.js']) await import(new URL(m, '${ENGINE}'));
    const { LazyOpenAI } = await import(new URL('openai-client.js', '${ENGINE}'));
    const lazy = new LazyOpenAI({ apiKey: 'unused', baseURL: 'http://127.0.0.1:9/v1' });
    writeFileSync(process.env.RESOLVE_LOG, 'made\\n', { flag: 'a' });
    const client = await lazy.client();
    if (client !== (await lazy.client())) throw new Error('a second client');
  `;
  await promisify(execFile)(process.execPath, ['--import', HOOKS.href, '--input-type=module', '-e', script], {
    env: { ...process.env, RESOLVE_LOG: log, RESOLVE_LOG_REGISTER: '1' },
  });
  t.ok(existsSync(log));
  const lines = readFileSync(log, 'utf8').trim().split('\n');
  const made = lines.indexOf('made');
  t.ok(made > 0, 'the service’s modules resolved packages before');
  t.ok(lines.slice(0, made).includes('knex'), 'the log sees the packages they import');
  t.notOk(lines.slice(0, made).includes('openai'), 'none of them loaded the SDK, nor did making a client');
  t.ok(lines.slice(made).includes('openai'), 'the first use did');
});
