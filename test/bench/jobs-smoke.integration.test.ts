// The jobs bench still runs end to end (seeding, the service and its queue worker, the LLM fake, the bare BullMQ
// worker, JSON and HTML), so bench/ cannot rot unnoticed. Figures are not asserted: they belong in notes.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

for (const variant of [
  { name: 'built-in processor on sqlite', args: [] as string[], what: /built-in processor, 5 segments/ },
  // Over the 10,000 characters that send a transcript to the processor's own thread (and the service must close it).
  { name: 'built-in processor on its thread (300-segment transcripts)', args: ['--segments', '300'], what: /built-in processor, 300 segments/ },
  {
    name: 'LLM processor (the fake answering in 50 ms) on PostgreSQL, jobs on a ROLE=jobs node',
    args: ['--llm-ms', '50', '--store', 'pg', '--concurrency', '4', '--job-nodes', '1'],
    what: /LLM processor, model answering in 50 ms, 5 segments, on 1 ROLE=jobs node\)/,
  },
]) {
  t.test(`npm run bench -- jobs --smoke, ${variant.name}: every job processed, result and report written`, async (t) => {
    const out = path.join(t.testdir(), 'jobs.json');
    const run = await runBench(['jobs', '--smoke', ...variant.args, '--out', out]);
    t.equal(run.code, 0, run.stderr);
    t.match(run.stdout, /^baseline: bare: a BullMQ worker/m, 'prints the baseline');
    t.match(run.stdout, /^goal: jobs lost or refused 0: 0 met$/m, 'no job lost');
    t.match(run.stdout, /read back over REST: 20 of 20 sampled conversations processed/, 'the conversations read back are processed');
    t.match(run.stderr, /jobs: service \[.*\] 100%/, 'draws a progress bar');

    const result = JSON.parse(readFileSync(out, 'utf8'));
    t.match(result, { scenario: 'jobs', version: 2, options: { jobs: 20 }, serviceExitCode: 0 });
    t.same(Object.keys(result.targets).sort(), ['bare', 'service']);
    for (const name of ['service', 'bare']) {
      const r = result.targets[name];
      t.equal(r.completed, 20, `${name}: 20 jobs completed`);
      t.equal(r.lost + r.refused, 0, `${name}: none lost or refused`);
      t.ok(r.jobsPerSec > 0 && r.latency.p50 > 0, `${name}: throughput and latency measured`);
      t.match(result.figures[`${name} jobs/s`], { value: Number, better: 'higher' });
    }
    t.match(result.targets.service.what, variant.what);
    const html = readFileSync(out.replace(/\.json$/, '.html'), 'utf8');
    t.match(html, /<h1>bench: jobs<\/h1>/);
    // 20 jobs may all finish within the chart's first second on a quick machine: a one-second series is a point.
    t.match(html, /<svg[^>]*>.*<(polyline|circle) /s, 'charts with their series drawn');
  });
}
