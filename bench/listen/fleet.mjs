// The macro bench: simulated wearables streaming encoded speech to /v4/listen at real-time pace, against the real service
// (provider fake behind it) and the bare uWS baseline, at a fixed size (--sessions) or in a capacity search (--ramp).
// One file because the fixed-size run, the rounds and the ramp share their set-up and report.
import { calibrate } from '../lib/calibrate.mjs';
import { ProcSampler, dirBytes, rssBytes, settledRss, treeCpuSeconds } from '../lib/procstat.mjs';
import { Progress } from '../lib/progress.mjs';
import { machine } from '../lib/report.mjs';
import { loadFixture } from './fixtures.mjs';
import { RampSearch, Timeline, drain, observe, ramp, rampTogether } from './measure.mjs';
import { bareTarget, serviceTarget } from './targets.mjs';
import { fleetResult } from './fleet-report.mjs';
import { THREAD_PROBE, rampResult } from './ramp-report.mjs';

/**
 * CPU cores `pid` uses over the next `seconds` (an idle baseline).
 * @param {number} pid
 * @param {number} seconds
 */
async function coresOver(pid, seconds) {
  const c0 = treeCpuSeconds(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  return (treeCpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000);
}

export const USAGE = `npm run bench -- fleet [--sessions 100] [--seconds 30] [--codec opus_fs320] [--stt auto] [--ramp | --rounds R] [options]
  --sessions N        devices, each one live session (default 100)
  --seconds S         measured streaming time (default 30)
  --codec C           pcm8, pcm16, opus, opus_fs320, aac, lc3, lc3_fs1030 (default opus_fs320)
  --stt MODE          auto: the provider_a fake when the service streams to it, else custom (default)
                      provider_a: require it; provider_b: the provider_b (Soniox protocol) fake instead;
                      custom: custom_stt=enabled (no STT stage); local: the default engine
  --baseline-seconds S  the same load against the bare uWS server for S seconds, for the CPU ratio (default 5; 0: skip)
  --ramp              capacity search instead: the largest N that holds for --hold seconds with every session streaming,
                      none closed, lag p99 < 300 ms and ≥ 99% of the audio arriving at the receiving end (the provider
                      fake behind the service, the bare server's decoder), no device's backlog over 1 s and the
                      generator on time (lateness p99 ≤ 50 ms), of the bare server and of the service with the same
                      generator, taking turns step by step (each target's sessions closed while the other steps) so
                      both see the same host; prints both ramps' steps, CPU per thread at --probe and at capacity,
                      and the ratio
  --from N --max N    first and largest N of the ramp (default 100 and 3000)
  --hold S            seconds each ramp step must hold (default 60)
  --rounds R          no search: --sessions N for --seconds, R times on each side, the service and the bare server
                      taking turns as in the ramp; reports the median CPU per session-second of each side and each
                      round's ratio (a shared host's speed drifts from minute to minute)
  --bare-forward      the bare server also sends each session's PCM on to a provider_a fake of its own (100 ms to a
                      message, one socket per session), the work a listen node cannot skip; its lag is still read
                      where it decodes
  --sequential        the whole bare ramp first, then the service's
  --service-first     the whole service ramp first, then the bare server's
  --generators N      generator processes, their reports summed (default: one per 400 devices, more when the box's
                      load average is above its cores; a ramp step fills them in turn); a step whose generator is
                      late (p99 > 50 ms) fails as the generator's, not the server's
  --probe N           a step the ramp's way up holds on its way past, for the per-thread CPU table (default 800)
  --open-rate R       devices arrive over time instead: R new sessions per second, each streaming once ready (a
                      fleet's morning); refused ones (1013) retry after 1-3 s; the window starts once all N arrived
  --pause-every S     mean seconds of audio between two pauses of a device, keep-alives only meanwhile (default 0: none)
  --pause-seconds S   mean pause length (default 5)
  --burst K           frames a device sends together, as a phone forwarding BLE packets (default 1)
  --keepalive S       keep-alive interval of every device (default 10)
  --idle-settle S     least seconds the idle service's RSS is watched before it counts as idle (default 20: an idle
                      service still shrinks in its first seconds; at most 5 S, and 45 s); per-session memory is
                      measured from it
  --webhook TYPE      every device's user has a realtime_transcript (or audio_bytes, 5 s) developer webhook pointed at a
                      local receiver in its own process; compare with the same run without it
  --speaker-id        two fixed-size runs, one after the other: no user has a speech profile (sessions find nothing
                      to compare and keep no audio), then every user has one (every session identifies its
                      speakers); the second result states what identification adds per session (CPU and RSS)
  --ack               two fixed-size runs, one after the other: plain sessions, then the same with ack=enabled (every
                      session's audio logged under DATA_DIR/audio-log and acknowledged); the second result states the
                      ack latency (from the send of the frame that completes an audio_ack's offset to its arrival, on
                      the device), and what acknowledged audio adds: CPU and disk bytes per session-second
  --profile           run the service under node --cpu-prof (profile in bench/results/profiles/)
  --out FILE          result file (default bench/results/<timestamp>-fleet.json; the HTML report goes beside it)`;

/**
 * @param {Record<string, string | true>} options
 * @param {string} name
 * @param {number} fallback
 */
export function num(options, name, fallback) {
  const v = options[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (v === true || !Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number ≥ 0`);
  return n;
}

/**
 * The idle service's RSS once it has settled (procstat.mjs settledRss: at least --idle-settle seconds), with a progress bar.
 * @param {number} pid
 * @param {Record<string, string | true>} options
 * @param {import('../lib/progress.mjs').Progress} progress
 * @param {() => void} [onSample] called at each RSS sample too (once a second)
 * @param {() => boolean} [busy] true while something else runs on the box (and owns the progress bar): samples
 *   taken meanwhile do not count
 */
export function idleRss(pid, options, progress, onSample, busy) {
  const minS = num(options, 'idle-settle', 20);
  // A short settling asked for (a smoke run) is bounded in proportion, not by the 45 s a measuring run allows.
  const maxS = Math.max(minS, Math.min(45, 5 * minS));
  /** The bar's 100%: seconds up to the settling's bound, from its first sample that counts. */
  let total = 0;
  return settledRss(pid, {
    minS,
    maxS,
    busy,
    onSample: (left) => {
      if (total === 0) progress.phase('service: idle RSS settling', (total = left + 1));
      progress.update(total - left);
      onSample?.();
    },
  });
}

/** @param {Record<string, string | true>} options */
export function fleetOptions(options) {
  return {
    generators: options.generators === undefined ? undefined : num(options, 'generators', 1),
    pauseEveryS: num(options, 'pause-every', 0),
    pauseS: num(options, 'pause-seconds', 5),
    burst: Math.max(1, Math.round(num(options, 'burst', 1))),
    keepAliveMs: num(options, 'keepalive', 10) * 1000,
  };
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  if (options.ack) {
    if (options['speaker-id'] || options.ramp || options.rounds !== undefined || options['open-rate'] !== undefined) throw new Error('--ack goes with a fixed-size run only');
    const plain = await fleetRun(options, undefined, null);
    return fleetRun({ ...options, 'baseline-seconds': '0' }, undefined, plain);
  }
  if (!options['speaker-id']) return fleetRun(options, undefined);
  if (options.ramp || options.rounds !== undefined || options['open-rate'] !== undefined) throw new Error('--speaker-id goes with a fixed-size run only');
  const off = await fleetRun(options, null);
  return fleetRun({ ...options, 'baseline-seconds': '0' }, off);
}

/**
 * @param {Record<string, string | true>} options
 * @param {any} speakerIdOff with --speaker-id: null in the run with identification off, that run's result in the run
 *   with it on (its baseline); undefined without it
 * @param {any} [ackOff] with --ack: null in the run without ack=enabled, that run's result in the run with it
 */
async function fleetRun(options, speakerIdOff, ackOff) {
  const codec = /** @type {import('./fixtures.mjs').CodecName} */ (String(options.codec ?? 'opus_fs320'));
  const stt = /** @type {any} */ (String(options.stt ?? 'auto'));
  if (!['auto', 'provider_a', 'provider_b', 'custom', 'local'].includes(stt)) throw new Error('--stt must be auto, provider_a, provider_b, custom or local');
  const webhook = /** @type {any} */ (options.webhook === undefined ? undefined : String(options.webhook));
  if (webhook !== undefined && !['realtime_transcript', 'audio_bytes'].includes(webhook)) throw new Error('--webhook must be realtime_transcript or audio_bytes');
  const rounds = options.rounds === undefined ? undefined : Math.round(num(options, 'rounds', 3));
  if (rounds !== undefined && !(rounds >= 1)) throw new Error('--rounds must be at least 1');
  if (rounds !== undefined && (options.ramp || options['open-rate'] !== undefined)) throw new Error('--rounds goes with neither --ramp nor --open-rate');
  const m = machine();
  m.calibration = await calibrate();
  const fixture = await loadFixture(codec);
  const sampler = new ProcSampler(1000);
  const timeline = new Timeline();
  const progress = new Progress('fleet', 1);
  sampler.start();
  const common = { fixture, sampler, timeline, progress, fleet: fleetOptions(options) };
  const bareForward = options['bare-forward'] === true;
  const profileDir = options.profile ? `bench/results/profiles/${new Date().toISOString().replace(/[:.]/g, '-')}` : undefined;
  const nodeArgs = profileDir ? ['--cpu-prof', '--cpu-prof-interval=5000', `--cpu-prof-dir=${profileDir}`] : [];
  try {
    if (options.ramp || rounds !== undefined) {
      const fixed = rounds === undefined ? undefined : Math.round(num(options, 'sessions', 100));
      const from = fixed ?? num(options, 'from', 100);
      const max = fixed ?? num(options, 'max', 3000);
      const hold = rounds === undefined ? num(options, 'hold', 60) : num(options, 'seconds', 30);
      const rampOpts = { from, max, holdS: hold, settleS: 3, probe: num(options, 'probe', THREAD_PROBE), ...(rounds === undefined ? {} : { rounds }) };
      const order = rounds === undefined && options['service-first'] ? 'service-first' : rounds === undefined && options.sequential ? 'bare-first' : 'interleaved';
      const wanted = (/** @type {import('./measure.mjs').Ctx} */ ctx) => ({ ...rampOpts, sessionsWanted: (/** @type {number} */ n) => ctx.fleet.open(n, true) });
      /** The stacks running now (a ramp that throws leaves them up), and the service's idle RSS. */
      /** @type {{ bare?: Awaited<ReturnType<typeof bareTarget>>, svc?: Awaited<ReturnType<typeof serviceTarget>>, idleRss: number }} */
      const up = { idleRss: NaN };
      /** @type {any} what rampResult reports */
      const out = {};
      const startBare = async () => (up.bare = await bareTarget({ ...common, devices: max, forward: bareForward }));
      const startSvc = async () => {
        const v = (up.svc = await serviceTarget({ ...common, devices: max, stt, nodeArgs }));
        up.idleRss = await idleRss(v.service.pid, options, progress);
        return v;
      };
      // Closing a target's sessions settles what it lost over its whole ramp; then it stops.
      const stopBare = async (/** @type {NonNullable<typeof up.bare>} */ b) => {
        out.bareDrain = await drain(b.ctx, fixture);
        up.bare = undefined;
        await b.stop();
      };
      const stopSvc = async (/** @type {NonNullable<typeof up.svc>} */ v) => {
        out.svcDrain = await drain(v.ctx, fixture);
        up.svc = undefined;
        out.exitCode = await v.stop();
      };
      try {
        if (order === 'interleaved') {
          // Both stacks up at once, idle but for the one stepping.
          const b = await startBare();
          const v = await startSvc();
          [out.limit, out.fleet] = await rampTogether([new RampSearch(b.ctx, wanted(b.ctx)), new RampSearch(v.ctx, wanted(v.ctx))], { quietS: 5 });
          await stopBare(b);
          await stopSvc(v);
          out.svc = v;
        } else {
          // One after the other: the second ramp runs on a box the first one kept saturated for minutes.
          for (const which of order === 'service-first' ? ['service', 'bare'] : ['bare', 'service']) {
            if (which === 'bare') {
              const b = await startBare();
              out.limit = await ramp(b.ctx, wanted(b.ctx));
              await stopBare(b);
            } else {
              const v = (out.svc = await startSvc());
              out.fleet = await ramp(v.ctx, wanted(v.ctx));
              await stopSvc(v);
            }
          }
        }
        return rampResult({ m, options, codec, fixture, stt: out.svc.stt, note: out.svc.note, order, rounds, ...out, idleRss: up.idleRss, sampler, timeline, profileDir });
      } finally {
        await up.bare?.stop();
        await up.svc?.stop();
      }
    }

    const sessions = Math.round(num(options, 'sessions', 100));
    const seconds = num(options, 'seconds', 30);
    const openRate = options['open-rate'] === undefined ? 0 : num(options, 'open-rate', 0);
    if (options['open-rate'] !== undefined && !(openRate > 0)) throw new Error('--open-rate must be more than 0');
    const baselineSeconds = num(options, 'baseline-seconds', 5);
    if (sessions < 1 || seconds < 1) throw new Error('--sessions and --seconds must be at least 1');
    const speakerId = speakerIdOff === undefined ? undefined : speakerIdOff === null ? 'off' : 'on';
    const ack = ackOff === undefined ? undefined : ackOff === null ? 'off' : 'on';
    const svc = await serviceTarget({ ...common, devices: sessions, stt, nodeArgs, ...(webhook ? { webhook } : {}), ...(speakerId ? { speakerId } : {}), ...(ack === 'on' ? { ack: true } : {}) });
    const pid = svc.service.pid;
    // The baseline runs while the service's idle RSS settles (the samples taken meanwhile do not count), so that
    // `fleet --sessions 50 --seconds 20` stays under a minute; with --open-rate it runs after the service, for as
    // many sessions as were streaming in the service's window.
    const bareUp = baselineSeconds > 0 ? bareTarget({ ...common, devices: sessions, forward: bareForward }) : undefined;
    bareUp?.catch(() => undefined); // awaited where the baseline runs (a failed start is reported there)
    let bareStopped = false;
    let exitCode = null;
    /** @type {any} */
    const figures = { stt: svc.stt, note: svc.note };
    /** Sessions the figures are per: all of them, or with --open-rate those streaming when the window starts. */
    let measured = sessions;
    const runBare = async (/** @type {number} */ n) => {
      const bare = await /** @type {NonNullable<typeof bareUp>} */ (bareUp);
      try {
        bare.ctx.fleet.open(n, true);
        progress.phase(`bare: opening ${n} sessions`, n);
        await bare.ctx.fleet.waitFor((t) => (progress.update(t.streaming), t.streaming >= n), 30_000 + n * 50, `${n} streaming sessions`);
        await new Promise((r) => setTimeout(r, 1000));
        figures.bare = await observe(bare.ctx, { seconds: baselineSeconds, label: `bare: ${n} sessions streaming`, sessions: n });
        figures.bareDrain = await drain(bare.ctx, fixture);
      } finally {
        bareStopped = true;
        await bare.stop();
      }
    };
    // Settled either way, a failed start included: the idle settling waits for it and must not wait for ever.
    let bareFirstDone = false;
    const bareFirst = bareUp && openRate === 0 ? runBare(sessions).finally(() => (bareFirstDone = true)) : undefined;
    bareFirst?.catch(() => undefined); // awaited once the idle RSS has settled
    try {
      try {
        // The idle CPU is read over the settled RSS's last two seconds, when the service was idle by that measure.
        /** @type {[number, number][]} */
        const cpuAt = [];
        figures.idleRss = await idleRss(pid, options, progress, () => cpuAt.push([performance.now(), treeCpuSeconds(pid)]), bareFirst && (() => !bareFirstDone));
        await bareFirst;
        const [from, to] = [cpuAt[cpuAt.length - 3], cpuAt[cpuAt.length - 1]];
        figures.idleCores = from && to ? (to[1] - from[1]) / ((to[0] - from[0]) / 1000) : await coresOver(pid, 2);
        figures.idleMem = await svc.service.memory();
        const fleet = svc.ctx.fleet;
        const openStart = performance.now();
        if (openRate > 0) {
          // Devices arrive over time, each streaming once ready; the service may refuse some
          // (LISTEN_SHED_DECODE_DELAY_MS).
          progress.phase(`service: ${sessions} sessions arriving, ${openRate} per second`, sessions);
          for (let n = 0; n < sessions; ) {
            await new Promise((r) => setTimeout(r, 100));
            n = Math.min(sessions, Math.floor(((performance.now() - openStart) / 1000) * openRate));
            fleet.open(n, true);
            progress.update(fleet.totals().streaming);
          }
          figures.openMs = Math.round(performance.now() - openStart);
          const t = fleet.totals();
          figures.arrivalRefused = Object.values(t.refused).reduce((a, b) => a + b, 0);
        } else {
          // Phase 1: every device connects and waits, ready, sending keep-alives only.
          fleet.open(sessions, false);
          progress.phase(`service: opening ${sessions} sessions`, sessions);
          await fleet.waitFor((t) => (progress.update(t.ready), t.ready >= sessions), 30_000 + sessions * 100, `${sessions} ready sessions`);
          figures.openMs = Math.round(performance.now() - openStart);
          figures.idleSessionsCores = await coresOver(pid, 2);
          figures.idleSessionsRss = rssBytes(pid);
          figures.idleSessionsMem = await svc.service.memory();
          // Phase 2: they all stream; 2 s of warm-up, then the measured window.
          fleet.stream();
          await fleet.waitFor((t) => t.streaming >= sessions, 10_000, `${sessions} streaming sessions`);
        }
        await new Promise((r) => setTimeout(r, 2000));
        // Arriving devices: the figures are per session streaming when the window starts (the refused ones retry).
        if (openRate > 0) measured = fleet.totals().streaming;
        const hooksBefore = await svc.webhookStats?.();
        const logDir = `${svc.service.env.DATA_DIR}/audio-log`;
        const logBytes0 = ack ? dirBytes(logDir) : 0;
        figures.window = await observe(svc.ctx, { seconds, label: `service: ${measured} sessions streaming`, sessions: measured });
        // What the window's audio logs hold on disk, per session-second of the window.
        if (ack) figures.audioLogBytesPerSessionS = Math.round((dirBytes(logDir) - logBytes0) / (measured * figures.window.wallS));
        figures.windowMem = await svc.service.memory();
        const hooksAfter = await svc.webhookStats?.();
        if (hooksBefore && hooksAfter) figures.webhook = { type: webhook, requests: hooksAfter.requests - hooksBefore.requests, bytes: hooksAfter.bytes - hooksBefore.bytes, segments: hooksAfter.segments - hooksBefore.segments, users: hooksAfter.users };
        figures.drain = await drain(svc.ctx, fixture);
        figures.liveAfterDrain = await svc.service.liveSessions();
      } finally {
        exitCode = await svc.stop();
      }
      if (bareUp && !bareFirst) await runBare(measured);
    } finally {
      // The service's phases failed: the baseline's stack, started beside them, goes too.
      if (bareUp && !bareStopped) await (await bareUp.catch(() => undefined))?.stop();
    }
    return fleetResult({ m, options, codec, fixture, sessions: measured, arriving: openRate > 0 ? sessions : undefined, seconds, baselineSeconds, figures, exitCode, sampler, timeline, profileDir, speakerId, speakerIdOff, ack, ackOff });
  } finally {
    progress.end();
    sampler.stop();
  }
}
