// A bad variable stops the command-line scripts with one line naming it and its range, exit status 2, no stack trace.
import t from 'tap';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = (name: string): string => fileURLToPath(new URL(`../../scripts/${name}.js`, import.meta.url));

function run(name: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [script(name), ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

t.test('token, admin and migrate refuse a bad variable in one line', async (t) => {
  const dataDir = t.testdir();
  const token = await run('token', ['alice'], { DATA_DIR: dataDir, ID_TOKEN_TTL_S: '1' });
  t.equal(token.code, 2);
  t.equal(token.stdout, '');
  t.equal(token.stderr, 'configuration error: ID_TOKEN_TTL_S: must be between 60 and 2592000, got 1\n');

  const admin = await run('admin', ['memory-access', 'alice', 'on'], { DATA_DIR: dataDir, RATE_LIMIT_PER_DAY: '0' });
  t.equal(admin.code, 2);
  t.equal(admin.stderr, 'configuration error: RATE_LIMIT_PER_DAY: must be between 1 and 1000000000, got 0\n');

  const migrate = await run('migrate', [], { DATA_DIR: dataDir, DATABASE_URL: 'mysql://x' });
  t.equal(migrate.code, 2);
  t.equal(migrate.stderr.split('\n').length, 2, `one line: ${migrate.stderr}`);
  t.match(migrate.stderr, /^configuration error: DATABASE_URL: /);

  const fine = await run('token', ['alice'], { DATA_DIR: dataDir, ID_TOKEN_TTL_S: '60' });
  t.equal(fine.code, 0, fine.stderr);
  t.match(fine.stdout, /^[\w-]+\.[\w-]+\.[\w-]+\n$/, 'a good value still prints a token');
});
