// The local-latency bench still runs end to end (the service with its default engine, real-time sessions, JSON and
// HTML), so bench/ cannot rot unnoticed; its figures are not asserted.
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- local-latency --smoke exits 0 and writes its result and report', async (t) => {
  const out = path.join(t.testdir(), 'local-latency.json');
  // --smoke: one session, one sentence (~4 s in real time), 2 s with the socket open and nothing sent.
  const run = await runBench(['local-latency', '--smoke', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^machine: /m, 'prints the machine');
  t.match(run.stdout, /^first words after speech starts \(ms\)/m, 'prints the first-word latency');
  t.match(run.stdout, /^last words after speech ends, no frames \(ms\)/m, 'prints the last-word latency');
  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.match(result, { scenario: 'local-latency', version: 2, options: { sessions: 1, smoke: true }, summary: { head: Array, rows: Array } });
  t.match(result.tables, [{ title: 'sessions', rows: [[String, String, String, String, String]] }]);
  t.ok(existsSync(out.replace(/\.json$/, '.html')), 'the HTML report');
});
