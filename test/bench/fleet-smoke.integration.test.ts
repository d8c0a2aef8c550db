// The fleet bench still runs end to end with 5 devices for 5 s (generator, service, provider_a fake, bare baseline,
// drain, JSON, HTML), and compare reads its result; the figures themselves are not asserted.
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runBench } from '../helpers/bench.js';

t.test('npm run bench -- fleet --sessions 5 --seconds 5 writes its result and report', async (t) => {
  const out = path.join(t.testdir(), 'fleet.json');
  const run = await runBench(['fleet', '--sessions', '5', '--seconds', '5', '--baseline-seconds', '2', '--idle-settle', '2', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^machine: .*, CPU stolen by the hypervisor during the run [\d.]+%$/m, 'prints the machine, with the CPU time the hypervisor took');
  t.match(run.stdout, /^baseline: a bare uWebSockets\.js server/m, 'prints the baseline');
  t.match(run.stdout, /^figure\s+service\s+bare uWS \(baseline\)/m, 'ends with the table');
  t.match(run.stdout, /^goal: frames lost = 0: /m, 'prints the goals');
  t.match(run.stdout, /^report: .*fleet\.html$/m, 'names the HTML report');
  t.match(run.stderr, /service: 5 sessions streaming \[.*\] 100%/, 'draws a progress bar');

  const r = JSON.parse(readFileSync(out, 'utf8'));
  t.match(r, { scenario: 'fleet', version: 2, options: { sessions: 5, seconds: 5, codec: 'opus_fs320' }, summary: { head: Array, rows: Array }, goals: Array });
  t.ok(['provider_a', 'custom'].includes(r.service.stt), `stt: ${r.service.stt}`);
  t.ok(r.machine.stealPercent >= 0 && r.machine.stealPercent <= 100, `steal: ${r.machine.stealPercent}%`);
  const cal = r.machine.calibration;
  t.ok(cal.syscallUs > 0 && cal.loopbackMessageUs > cal.syscallUs && cal.threadRoundTripUs > cal.syscallUs, `the box's speed: ${JSON.stringify(cal)}`);
  t.match(run.stdout, /^machine: .*, CPU µs per system call [\d.]+, per 3\.2 kB loopback TCP message [\d.]+, per round trip to a sleeping thread [\d.]+, /m, 'prints it');
  const w = r.service.window;
  t.ok(w.framesSent >= 5 * 5 * 40, `the devices sent frames at real-time pace (${w.framesSent})`);
  t.equal(w.unexpectedCloses, 0, 'no session was closed by the server');
  t.type(w.serverCpuUsPerSessionS, 'number');
  t.type(w.generatorCpuS, 'number', 'the generator’s own CPU is measured');
  t.ok(r.service.drain.totals.audioMs > 0, 'audio was counted');
  if (r.service.stt === 'provider_a') {
    t.type(r.service.drain.lostFrames, 'number', 'frames lost are counted at the provider');
    t.equal(r.service.drain.keptFrames, 0, 'and frames kept after a provider failure read from the service (none: no provider failed)');
    t.type(w.lag.p99, 'number', 'frame latency is measured at the provider');
    t.ok(w.segLatency.count > 0, 'segments came back to the devices');
    t.ok(w.engine.decodeCount > 0 && typeof w.engine.decodeP99Ms === 'number', 'the service’s own decode delay was read from its /metrics');
  }
  t.type(r.service.bare.serverCpuUsPerSessionS, 'number', 'the bare baseline ran');
  t.match(r.figures['server CPU µs per session-s'], { value: Number, better: 'lower' });
  t.equal(r.service.exitCode, 0, 'the service stopped cleanly on SIGTERM');

  const html = readFileSync(out.replace(/\.json$/, '.html'), 'utf8');
  t.match(html, /<h1>bench: fleet<\/h1>/);
  for (const title of ['Frame latency', 'Streaming sessions', 'CPU per process', 'RSS of the server under test']) t.match(html, title);
  t.match(html, /<svg[^>]*>.*<polyline/s, 'line charts');

  const cmp = await runBench(['compare', out, out]);
  t.equal(cmp.code, 0, cmp.stderr);
  t.match(cmp.stdout, /^figure\s+A\s+B\s+B \/ A\s+B is/m);
  t.match(cmp.stdout, /server CPU µs per session-s\s+\S+\s+\S+\s+1\.000\s+≈/);
});

// One run covers both options: each run starts a service and a fake.
t.test('fleet --stt provider_b --open-rate: devices arrive over time and stream to the provider_b fake, which measures the PCM as provider_a’s does', async (t) => {
  const out = path.join(t.testdir(), 'fleet.json');
  const run = await runBench(['fleet', '--stt', 'provider_b', '--sessions', '4', '--open-rate', '8', '--seconds', '3', '--baseline-seconds', '0', '--idle-settle', '2', '--out', out]);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stderr, /checking that .* streams to the provider_b fake/);
  t.match(run.stderr, /service: 4 sessions arriving, 8 per second/, 'a progress phase for the arrivals');
  t.match(run.stdout, /^ {2}of 4 arriving at 8\/s; refused with 1013 while arriving \/ in the window, at the window's end streaming\s+0 \/ 0, 4\s/m, 'none refused, all four streaming');
  t.match(run.stdout, /^provider_b fake CPU, cores/m, 'the fake’s CPU is reported under its name');
  const r = JSON.parse(readFileSync(out, 'utf8'));
  t.equal(r.service.window.streamingAtEnd, 4);
  t.ok(r.service.openMs >= 400, `arriving took about half a second (${r.service.openMs} ms)`);
  t.equal(r.service.stt, 'provider_b');
  const w = r.service.window;
  t.type(w.lag.p99, 'number', 'frame latency is measured at the provider_b fake');
  t.ok(w.lag.count >= 4 * 2 * 5, `PCM messages arrived there (${w.lag.count})`);
  // A mean over the window: a session that turns ready inside it sends a shorter first message (drawn per stream, so
  // sessions that start together do not send together) and what it held before ready as one larger message.
  t.ok(w.messageMs >= 95 && w.messageMs <= 110, `about 100 ms of PCM per message, in the mean (${w.messageMs})`);
  t.equal(r.service.drain.lostFrames, 0, 'no frame lost between the devices and the provider');
  t.equal(r.service.drain.streamsLeftOpen, 0, 'every provider stream ended');
});
