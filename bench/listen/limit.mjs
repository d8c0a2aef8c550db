// The ceiling of the box: the fleet's generator against a bare uWS server that only decodes each frame inline
// (bare-listen.mjs): a capacity ramp, or one fixed load with --sessions.
import { calibrate } from '../lib/calibrate.mjs';
import { ProcSampler } from '../lib/procstat.mjs';
import { Progress } from '../lib/progress.mjs';
import { figuresOf, finish, machine } from '../lib/report.mjs';
import { loadFixture } from './fixtures.mjs';
import { Timeline, drain, observe, ramp } from './measure.mjs';
import { bareTarget } from './targets.mjs';
import { fleetOptions, num } from './fleet.mjs';
import { LATENCY_NOTE } from './fleet-report.mjs';
import { THREAD_PROBE, rampResult } from './ramp-report.mjs';

export const USAGE = `npm run bench -- limit [--codec opus_fs320] [--from 100] [--max 3000] [--hold 60] | [--sessions N --seconds S]
  capacity search of a bare uWebSockets.js server that decodes each frame inline (no actors, pool or STT), with the
  fleet's generator split over processes: the largest N that passes the fleet ramp's criteria for --hold seconds
  (every session streaming, none closed, PCM lag p99 < 300 ms, ≥ 99% of the audio decoded, no device's backlog over
  1 s, generator lateness p99 ≤ 50 ms); each step reports the generator's CPU and lateness
  --sessions N --seconds S   one fixed load instead of the search (CPU per session-second of server and generator)
  generator options as for fleet: --generators, --probe, --pause-every, --pause-seconds, --burst, --keepalive
  --bare-forward  the server also sends each session's PCM on to a provider_a fake (as for fleet)
  --out FILE     result file (default bench/results/<timestamp>-limit.json; the HTML report goes beside it)`;

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const codec = /** @type {import('./fixtures.mjs').CodecName} */ (String(options.codec ?? 'opus_fs320'));
  const m = machine();
  m.calibration = await calibrate();
  const fixture = await loadFixture(codec);
  const sampler = new ProcSampler(1000).start();
  const timeline = new Timeline();
  const progress = new Progress('limit', 1);
  const fixed = options.sessions !== undefined;
  const devices = fixed ? Math.round(num(options, 'sessions', 100)) : num(options, 'max', 3000);
  const bare = await bareTarget({ fixture, sampler, timeline, progress, devices, fleet: fleetOptions(options), forward: options['bare-forward'] === true });
  try {
    if (!fixed) {
      const limit = await ramp(bare.ctx, { from: num(options, 'from', 100), max: devices, holdS: num(options, 'hold', 60), settleS: 3, probe: num(options, 'probe', THREAD_PROBE), sessionsWanted: (n) => bare.ctx.fleet.open(n, true) });
      const bareDrain = await drain(bare.ctx, fixture);
      const none = { capacity: 0, firstFail: null, steps: [] };
      return rampResult({ scenario: 'limit', m, options, codec, fixture, stt: 'none', limit, fleet: none, bareDrain, svcDrain: { lostFrames: null }, idleRss: NaN, exitCode: null, sampler, timeline });
    }
    const seconds = num(options, 'seconds', 30);
    bare.ctx.fleet.open(devices, true);
    progress.phase(`bare: opening ${devices} sessions`, devices);
    await bare.ctx.fleet.waitFor((t) => (progress.update(t.streaming), t.streaming >= devices), 30_000 + devices * 50, `${devices} streaming sessions`);
    await new Promise((r) => setTimeout(r, 2000));
    const w = await observe(bare.ctx, { seconds, label: `bare: ${devices} sessions`, sessions: devices });
    const d = await drain(bare.ctx, fixture);
    const result = {
      scenario: 'limit',
      version: 2,
      startedAt: new Date(Date.now() - timeline.now() * 1000).toISOString(),
      machine: m,
      options: { codec, sessions: devices, seconds, raw: options },
      baseline: 'none: this is the baseline of fleet (a bare uWebSockets.js server decoding each frame inline)',
      summary: {
        head: ['figure', 'value', 'note'],
        rows: [
          ['streaming sessions', String(devices), `${codec}, ${fixture.frameMs} ms frames`],
          ['frame latency p50 / p95 / p99 / max, ms', `${w.lag.p50} / ${w.lag.p95} / ${w.lag.p99} / ${w.lag.max}`, 'p99 < 100 for a passing ramp step'],
          ['bare server CPU, cores (µs per session-second)', `${w.serverCores} (${w.serverCpuUsPerSessionS})`, 'reference: ~0.83 cores for 1,000 opus_fs320 devices'],
          ['generator CPU, cores (µs per session-second)', `${w.generatorCores} (${w.generatorCpuUsPerSessionS})`, 'reference: ~0.5 cores for 1,000 devices'],
          ['generator lateness p99, ms', String(w.lateness.p99), 'how late frames left the generator'],
          ['bare server RSS, MiB', String(w.rssMiB), ''],
          ['frames lost', String(d.lostFrames), 'sent − decoded after drain'],
          ['sessions closed early', String(w.unexpectedCloses), ''],
        ],
      },
      figures: figuresOf({
        'bare µs per session-s': [w.serverCpuUsPerSessionS, 'µs', 'lower'],
        'generator µs per session-s': [w.generatorCpuUsPerSessionS, 'µs', 'lower'],
        'frame latency p99 ms': [w.lag.p99, 'ms', 'lower'],
      }),
      notes: [LATENCY_NOTE],
      charts: [
        timeline.chart('latency', 'Frame latency per 2 s window (device → PCM out of the bare server)', 'ms'),
        timeline.chart('sessions', 'Streaming sessions', 'sessions'),
        { title: 'CPU per process', yLabel: 'cores', lines: sampler.lines('cores') },
        { title: 'RSS of the bare server', yLabel: 'MiB', lines: sampler.lines('rssMiB', (n) => n === 'bare') },
      ],
      window: w,
      drain: d,
    };
    finish(/** @type {any} */ (result), options);
    return result;
  } finally {
    await bare.stop();
    progress.end();
    sampler.stop();
  }
}
