// The notify bench still runs end to end (service, app and installs, the load generator over many users' paths, the
// outbox count, JSON and HTML), so bench/ cannot rot unnoticed.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- notify --smoke exits 0 and every accepted notification is in the outbox', async (t) => {
  const out = path.join(t.testdir(), 'notify.json');
  const run = await runBench(['notify', '--smoke', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^goal: direct notifications accepted ≥ 2000\/s/m, 'prints the goals');
  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.match(result, { scenario: 'notify', version: 2, summary: { head: Array, rows: Array } });
  t.equal(result.serviceExitCode, 0, 'the service stopped cleanly on SIGTERM');
  const [row] = result.summary.rows as string[][];
  t.ok(Number(row![1]) > 0, 'notifications were accepted');
  t.equal(row![4], '0', 'none refused');
  t.match(result.figures['notify req/s'], { value: Number, better: 'higher' });
});
