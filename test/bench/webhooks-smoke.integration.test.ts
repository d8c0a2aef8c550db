// The webhooks bench still runs end to end (seeding, the service's producer and worker, the receiver, the bare sender,
// JSON and HTML), so bench/ cannot rot unnoticed. Figures are not asserted: they belong in notes.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- webhooks --smoke: every delivery received, result and report written', async (t) => {
  const out = path.join(t.testdir(), 'webhooks.json');
  const run = await runBench(['webhooks', '--smoke', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^full speed\s+50\s+50\s/m, 'every delivery of the full-speed run received');
  t.match(run.stdout, /^200\/s\s+50\s+50\s/m, 'every delivery of the paced run received');
  t.match(run.stdout, /^bare sender\s+50\s+50\s/m, 'every request of the bare sender received');
  t.match(run.stdout, /durable delivery against sending alone: [\d.]+× fewer deliveries\/s/, 'the ratio to the baseline printed');
  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.match(result, { scenario: 'webhooks', version: 2, options: { total: 50, latencyN: 50 } });
  t.match(result.figures['deliveries/s'], { value: Number, better: 'higher' });
  t.match(result.figures['p99 enqueue to receipt'], { value: Number, better: 'lower' });
  t.match(readFileSync(out.replace(/\.json$/, '.html'), 'utf8'), /<h1>bench: webhooks<\/h1>/);
});
