// The rest bench still runs end to end (service, seeding, the load generator, bare uWS, JSON and HTML), so bench/ cannot rot unnoticed.
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- rest --smoke exits 0 and writes its result and report', async (t) => {
  const out = path.join(t.testdir(), 'rest.json');
  // --smoke: 1 s per target, no warm-up.
  const run = await runBench(['rest', '--smoke', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^machine: /m, 'prints the machine');
  t.match(run.stdout, /^baseline: bare/m, 'prints the baseline');
  t.match(run.stdout, /^goal: GET throughput vs bare uWS/m, 'prints the goal');
  t.match(run.stdout, /noisy when it is shared/, 'warns that figures are noisy');
  t.match(run.stderr, /rest \[.*\] 100%/, 'draws a progress bar');

  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.match(result, { scenario: 'rest', version: 2, baseline: /^bare: /, summary: { head: Array, rows: Array } });
  t.equal(result.serviceExitCode, 0, 'the service stopped cleanly on SIGTERM');
  t.match(result.machine, { cpus: Number, cpuModel: String, node: String, loadavg: Array });
  t.same(Object.keys(result.targets).sort(), ['bare', 'get', 'post', 'uncached']);
  for (const name of ['get', 'uncached', 'post', 'bare']) {
    const target = result.targets[name];
    t.match(target, { requestsPerSec: Number, p50Ms: Number, p99Ms: Number, requests: Number }, name);
    t.ok(target.requests > 0, `${name} completed requests`);
    t.equal(target.non2xx + target.errors + target.timeouts, 0, `${name}: every answer was 2xx`);
    t.match(result.figures[`${name} req/s`], { value: Number, better: 'higher' });
  }
  t.match(result.goals, [{ name: String, target: '≥ 0.25', value: Number, met: Boolean }]);
  const html = readFileSync(out.replace(/\.json$/, '.html'), 'utf8');
  t.match(html, /<h1>bench: rest<\/h1>/);
  t.match(html, /<svg[^>]*>.*<rect/s, 'a bar chart');
  t.ok(existsSync(out.replace(/\.json$/, '.html')));
});
