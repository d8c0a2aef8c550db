// The rest bench still runs end to end (service, seeding, autocannon, bare uWS, JSON result), so bench/ cannot rot unnoticed.
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// dist/test/bench/ -> the repository root, where bench/run.mjs lives (bench/ is plain ESM, not compiled).
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const RUN = path.join(ROOT, 'bench/run.mjs');

t.test('npm run bench -- rest --smoke exits 0 and writes its result', async (t) => {
  const out = path.join(t.testdir(), 'rest.json');
  // --smoke: 1 s per target, no warm-up. A fresh clone also installs bench/node_modules here (npm install --prefix bench).
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [RUN, 'rest', '--smoke', '--out', out], { cwd: ROOT, timeout: 90_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^machine: /m, 'prints the machine');
  t.match(run.stdout, /^baseline: /m, 'prints the baseline');
  t.match(run.stdout, /noisy when it is shared/, 'warns that figures are noisy');

  const result = JSON.parse(readFileSync(out, 'utf8'));
  t.equal(result.scenario, 'rest');
  t.equal(result.baseline, 'bare');
  t.equal(result.serviceExitCode, 0, 'the service stopped cleanly on SIGTERM');
  t.match(result.machine, { cpus: Number, cpuModel: String, node: String, loadavg: Array });
  t.same(Object.keys(result.targets).sort(), ['bare', 'get', 'post', 'uncached']);
  for (const name of ['get', 'uncached', 'post', 'bare']) {
    const target = result.targets[name];
    t.match(target, { requestsPerSec: Number, p50Ms: Number, p99Ms: Number, requests: Number }, name);
    t.ok(target.requests > 0, `${name} completed requests`);
    t.equal(target.non2xx + target.errors + target.timeouts, 0, `${name}: every answer was 2xx`);
  }
  t.type(result.ratios.get, 'number');
  t.type(result.ratios.post, 'number');
  t.type(result.ratios.uncached, 'number');
  t.match(result.goal, { target: 'get', minRatio: 0.25, met: Boolean });
});
