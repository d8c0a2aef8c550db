// The capacity ramp of the fleet bench still runs end to end (one step each for the bare server and the service, taking
// turns), with its result file; the figures themselves are not asserted.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- fleet --ramp: the bare server and the service take turns', async (t) => {
  const out = path.join(t.testdir(), 'ramp.json');
  const run = await runBench(['fleet', '--ramp', '--from', '2', '--max', '2', '--hold', '2', '--idle-settle', '2', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^capacity, sessions \(largest passing step\)\s+2\s+2\s+1\s/m, 'both held 2 sessions');
  const r = JSON.parse(readFileSync(out, 'utf8'));
  t.match(r, { scenario: 'fleet', options: { ramp: true, order: 'interleaved' }, limit: { capacity: 2 }, fleet: { capacity: 2 } });
  // The passing steps (a step over the latency lines on a busy machine is held once more, and listed twice).
  const bare = r.limit.steps.find((s: { pass: boolean }) => s.pass);
  const svc = r.fleet.steps.find((s: { pass: boolean }) => s.pass);
  const box = new RegExp(`^the box at capacity: server \\+ generator \\+ fake, cores of ${r.machine.cpus}\\s+(\\S+)\\s+(\\S+)`, 'm').exec(run.stdout);
  const [svcBox, bareBox] = [Number(box?.[1]), Number(box?.[2])];
  t.ok(Math.abs(svcBox - (svc.serverCores + svc.generatorCores + svc.fakeCores)) < 0.002, `the box's cores at the service's capacity sum its processes (${svcBox})`);
  t.ok(Math.abs(bareBox - (bare.serverCores + bare.generatorCores)) < 0.002, `and at the bare server's (${bareBox})`);
  t.ok(r.limit.steps[0].endedS <= r.fleet.steps[0].startedS, `the service's step (from ${r.fleet.steps[0].startedS} s) began after the bare server's ended (${r.limit.steps[0].endedS} s)`);
  t.match(run.stdout, /^CPU per thread, cores \(µs per session-second\):\n\s*thread\s+service at 2\s+bare at 2\s*\n\s*main\s+\d/m, 'the per-thread table of both sides');
  const names: string[] = svc.threads.map((x: { thread: string }) => x.thread);
  t.equal(names[0], 'main');
  t.ok(names.some((n) => /^task-decode \d$/.test(n)), `the service's codec threads by name (${names.join(', ')})`);
  t.equal(bare.sessions, 2);
  t.equal(svc.sessions, 2);
  t.equal(r.drains.bare.lostFrames, 0, 'the bare server lost no frame');
  if (r.options.stt === 'provider_a') t.equal(r.drains.service.lostFrames, 0, 'the service lost no frame, its sessions closed between turns included');
  t.match(r.notes.join('\n'), /took turns step by step/);
});
