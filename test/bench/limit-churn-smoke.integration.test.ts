// The limit (fixed load) and churn benches still run end to end against the bare server and the service.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('limit (fixed load) and churn run end to end', async (t) => {
  const dir = t.testdir();
  const limit = await runBench(['limit', '--sessions', '5', '--seconds', '3', '--out', path.join(dir, 'limit.json')]);
  t.equal(limit.code, 0, limit.stderr);
  const l = JSON.parse(readFileSync(path.join(dir, 'limit.json'), 'utf8'));
  t.match(l, { scenario: 'limit', window: { sessions: 5, serverCpuUsPerSessionS: Number, generatorCpuUsPerSessionS: Number }, drain: { lostFrames: Number } });

  const churn = await runBench(['churn', '--seconds', '8', '--sessions', '5', '--min', '1', '--max', '2', '--first', '3', '--target', '10', '--idle-settle', '2', '--out', path.join(dir, 'churn.json')]);
  t.equal(churn.code, 0, churn.stderr);
  const c = JSON.parse(readFileSync(path.join(dir, 'churn.json'), 'utf8'));
  t.match(c, { scenario: 'churn', goals: Array, service: { idleRss: Number, exitCode: 0 } });
  t.ok(c.service.totals.closed >= 10, `sessions came and went (${c.service.totals.closed})`);
  t.equal(c.service.liveAfterDrain, 0, 'the service holds no session once the devices left');
});
