// The limit (fixed load) and churn benches still run end to end against the bare server and the service; the bare
// server's forwarding of its PCM to a provider fake (--bare-forward) too.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, runBench } from '../helpers/bench.js';

t.test('limit (fixed load) and churn run end to end', async (t) => {
  const dir = t.testdir();
  const limit = await runBench(['limit', '--sessions', '5', '--seconds', '3', '--bare-forward', '--out', path.join(dir, 'limit.json')]);
  t.equal(limit.code, 0, limit.stderr);
  const forwarded = /bare server: (\d+) bytes of PCM forwarded, (\d+) received by its provider fake, 0 sockets refused/.exec(limit.stdout + limit.stderr);
  t.ok(forwarded && Number(forwarded[1]) > 0 && Number(forwarded[2]) > 0.9 * Number(forwarded[1]), `the bare server forwarded its PCM to the fake (${forwarded?.[0]})`);
  const l = JSON.parse(readFileSync(path.join(dir, 'limit.json'), 'utf8'));
  t.match(l, { scenario: 'limit', window: { sessions: 5, serverCpuUsPerSessionS: Number, generatorCpuUsPerSessionS: Number }, drain: { lostFrames: Number } });

  const churn = await runBench(['churn', '--seconds', '8', '--sessions', '5', '--min', '1', '--max', '2', '--first', '3', '--target', '10', '--idle-settle', '2', '--out', path.join(dir, 'churn.json')]);
  t.equal(churn.code, 0, churn.stderr);
  const c = JSON.parse(readFileSync(path.join(dir, 'churn.json'), 'utf8'));
  t.match(c, { scenario: 'churn', goals: Array, service: { idleRss: Number, exitCode: 0 } });
  t.ok(c.service.totals.closed >= 10, `sessions came and went (${c.service.totals.closed})`);
  t.equal(c.service.liveAfterDrain, 0, 'the service holds no session once the devices left');
  const memory = c.charts.find((ch: { title: string }) => ch.title.startsWith('Where the service'));
  t.same(
    memory.lines.map((l: { name: string }) => l.name),
    ['JS heap committed', 'JS heap used', 'malloc in use', 'malloc kept free', 'codec threads JS heap committed', 'codec threads JS heap used'],
    'the report charts where the memory is',
  );
  t.ok(memory.lines.every((l: { points: [number, number][] }) => l.points.length >= 1 && l.points.every(([, mib]) => mib > 0)));
});

t.test('the churn slope tells a leak from a plateau', async (t) => {
  const { slopeKiBPer1000 } = (await import(pathToFileURL(path.join(ROOT, 'bench/listen/churn.mjs')).href)) as {
    slopeKiBPer1000: (s: { closed: number; rss: number }[]) => number | null;
  };
  const run = (rssOf: (closed: number, i: number) => number) => Array.from({ length: 120 }, (_, i) => ({ closed: i * 20, rss: rssOf(i * 20, i) }));
  // 15 MiB per connection, the compatible system's leak: 15 × 1024 × 1000 KiB per 1,000 sessions.
  t.equal(slopeKiBPer1000(run((closed) => 200 * 2 ** 20 + closed * 15 * 2 ** 20)), 15 * 1024 * 1000);
  // A plateau that wobbles ±2 MiB has no slope worth the name.
  const flat = slopeKiBPer1000(run((_, i) => 200 * 2 ** 20 + (i % 2 ? 2 : -2) * 2 ** 20));
  t.ok(flat !== null && Math.abs(flat) < 50, `flat: ${flat}`);
  t.equal(slopeKiBPer1000(run(() => 1).slice(0, 5)), null, 'too few samples');
  t.equal(slopeKiBPer1000(Array.from({ length: 20 }, () => ({ closed: 7, rss: 1 }))), null, 'no sessions came and went');
});
