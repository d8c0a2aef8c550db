// The day-summary bench still runs end to end (LLM fake, seeding, the hour's run, every summary stored, JSON and
// HTML), so bench/ cannot rot unnoticed.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- day-summary --smoke exits 0 with every user summarised', async (t) => {
  const out = path.join(t.testdir(), 'day-summary.json');
  const run = await runBench(['day-summary', '--smoke', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^goal: the hourly run for 200 users/m, 'prints the goal');
  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.match(result, { scenario: 'day-summary', version: 1, options: { users: 200 } });
  t.ok(result.figures['day-summary run s'].value > 0);
});
