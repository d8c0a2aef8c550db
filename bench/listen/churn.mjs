// Churn: devices connect, stream 5–30 s (pausing now and then like devices do) and leave, continuously, against the
// real service; its RSS after 10,000 sessions have come and gone must be within 10% of its RSS after the first 100.
import { calibrate } from '../lib/calibrate.mjs';
import { ProcSampler, median, rssBytes, treeCpuSeconds } from '../lib/procstat.mjs';
import { Progress } from '../lib/progress.mjs';
import { figuresOf, finish, machine } from '../lib/report.mjs';
import { loadFixture } from './fixtures.mjs';
import { Timeline, drain, memoryLines, mib } from './measure.mjs';
import { serviceTarget } from './targets.mjs';
import { fleetOptions, idleRss, num } from './fleet.mjs';
import { GOALS, memoryChart } from './fleet-report.mjs';

export const USAGE = `npm run bench -- churn [--minutes 10] [--sessions N] [--min 5] [--max 30] [--codec opus_fs320] [--stt auto]
  --minutes M     how long sessions keep coming and going (default 10; --seconds S for shorter runs)
  --sessions N    sessions alive at once (default: enough for --target sessions to finish in the time)
  --min, --max    each session streams a uniform random min…max seconds (default 5 and 30)
  --first K       the early RSS checkpoint: after K sessions came and went (default 100)
  --target K      the late checkpoint (default 10000; if not reached, the end of the run)
  --pause-every S --pause-seconds S   device pauses, keep-alives only (default 15 and 3)
  other generator and STT options as for fleet, and --idle-settle; --out FILE as usual`;

const heapCell = (/** @type {{ heapUsed: number, heapTotal: number, external: number, mallocInUse: number, mallocFree: number } | null} */ m) =>
  m ? [m.heapUsed, m.heapTotal, m.external, m.mallocInUse, m.mallocFree].map((b) => (Number.isNaN(b) ? '-' : mib(b))).join(' / ') : '-';

/**
 * Least-squares slope of RSS against sessions come and gone, in KiB per 1,000 sessions; null with too few sessions.
 * @param {{ closed: number, rss: number }[]} samples
 */
export function slopeKiBPer1000(samples) {
  const n = samples.length;
  if (n < 10) return null;
  const mx = samples.reduce((a, s) => a + s.closed, 0) / n;
  const my = samples.reduce((a, s) => a + s.rss, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const s of samples) {
    sxy += (s.closed - mx) * (s.rss - my);
    sxx += (s.closed - mx) ** 2;
  }
  if (sxx < 100 ** 2) return null;
  return Math.round((sxy / sxx) * 1000 / 1024);
}

/** @param {Record<string, string | true>} options */
export async function run(options) {
  const codec = /** @type {import('./fixtures.mjs').CodecName} */ (String(options.codec ?? 'opus_fs320'));
  const seconds = options.seconds !== undefined ? num(options, 'seconds', 600) : num(options, 'minutes', 10) * 60;
  const minS = num(options, 'min', 5);
  const maxS = Math.max(minS, num(options, 'max', 30));
  const first = Math.round(num(options, 'first', 100));
  const target = Math.round(num(options, 'target', 10_000));
  // Each session also spends ~0.5 s connecting and waiting to reconnect; 10% margin.
  const sessions = Math.round(num(options, 'sessions', Math.ceil(((target * ((minS + maxS) / 2 + 0.5)) / seconds) * 1.1)));
  const m = machine();
  m.calibration = await calibrate();
  const fixture = await loadFixture(codec);
  const sampler = new ProcSampler(1000).start();
  const timeline = new Timeline();
  const progress = new Progress('churn', 1);
  const fleetOpts = { ...fleetOptions(options), pauseEveryS: num(options, 'pause-every', 15), pauseS: num(options, 'pause-seconds', 3) };
  const svc = await serviceTarget({ fixture, sampler, timeline, progress, devices: sessions, stt: /** @type {any} */ (String(options.stt ?? 'auto')), fleet: fleetOpts, tokenTtlS: seconds + 3600 });
  const pid = svc.service.pid;
  /** @type {any} */
  const f = { sessions, seconds, minS, maxS };
  let exitCode = null;
  try {
    f.idleRss = await idleRss(pid, options, progress);
    const fleet = svc.ctx.fleet;
    fleet.churn(sessions, minS, maxS);
    /** @type {{ closed: number, rss: number, mem?: { heapUsed: number, heapTotal: number, external: number } }[]} */
    const samples = [];
    const cpu0 = treeCpuSeconds(pid);
    const gen0 = fleet.pids.reduce((s, p) => s + treeCpuSeconds(p), 0);
    const start = performance.now();
    progress.phase(`churn: ${sessions} at a time`, seconds);
    for (let i = 1; i <= seconds; i++) {
      await new Promise((r) => setTimeout(r, Math.max(0, start + i * 1000 - performance.now())));
      const t = fleet.totals();
      const rss = rssBytes(pid);
      // Every 5 s, what of it is the JS heap (a scrape of /metrics; cheap, but not free).
      const mem = i % 5 === 0 ? await svc.service.memory() : undefined;
      samples.push({ closed: t.closed, rss, ...(mem ? { mem } : {}) });
      if (mem) memoryLines(timeline, mem);
      timeline.add('sessions', 'streaming', t.streaming);
      timeline.add('done', 'sessions come and gone', t.closed);
      const early = Object.values(t.unexpected).reduce((a, b) => a + b, 0);
      progress.update(i, `${t.closed} came and went  ${t.streaming} streaming  RSS ${mib(rss)} MiB  closed early ${early}`);
    }
    const wallS = (performance.now() - start) / 1000;
    f.serverCores = Math.round(((treeCpuSeconds(pid) - cpu0) / wallS) * 1000) / 1000;
    f.generatorCores = Math.round(((fleet.pids.reduce((s, p) => s + treeCpuSeconds(p), 0) - gen0) / wallS) * 1000) / 1000;
    // RSS at a checkpoint: the median of the 5 samples from the second it was passed.
    const passed = (/** @type {number} */ k) => samples.findIndex((s) => s.closed >= k);
    const at = (/** @type {number} */ k) => {
      const i = passed(k);
      return i < 0 ? null : median(samples.slice(i, i + 5).map((s) => s.rss));
    };
    const lastClosed = samples.at(-1)?.closed ?? 0;
    f.firstCheckpoint = first;
    f.lateCheckpoint = lastClosed >= target ? target : lastClosed;
    f.rssAfterFirst = at(first);
    f.rssAfterLate = lastClosed >= target ? at(target) : median(samples.slice(-5).map((s) => s.rss));
    // The heap figures nearest each checkpoint (sampled every 5 s).
    const memAt = (/** @type {number} */ k) => {
      const i = passed(k);
      return i < 0 ? null : (samples.slice(i).find((s) => s.mem)?.mem ?? null);
    };
    // A leak grows with sessions served; warm-up (V8's heap and the allocators' arenas sizing themselves to the
    // load) levels off. The slope of RSS against sessions come and gone over the run's second half tells the two
    // apart.
    f.slopeKiBPer1000 = slopeKiBPer1000(samples.slice(Math.floor(samples.length / 2)));
    f.memAfterFirst = memAt(first);
    f.memAfterLate = lastClosed >= target ? memAt(target) : samples.findLast((s) => s.mem)?.mem ?? null;
    f.drain = await drain(svc.ctx, fixture);
    await new Promise((r) => setTimeout(r, 3000));
    f.rssAfterAllLeft = rssBytes(pid);
    f.memAfterAllLeft = await svc.service.memory();
    f.liveAfterDrain = await svc.service.liveSessions();
    f.totals = f.drain.totals;
  } finally {
    exitCode = await svc.stop();
    progress.end();
    sampler.stop();
  }
  const growth = f.rssAfterFirst && f.rssAfterLate ? Math.round(((f.rssAfterLate - f.rssAfterFirst) / f.rssAfterFirst) * 1000) / 1000 : null;
  const early = Object.values(f.totals.unexpected).reduce((/** @type {number} */ a, /** @type {number} */ b) => a + b, 0);
  const xDomain = [0, timeline.now()];
  const result = {
    scenario: 'churn',
    version: 2,
    startedAt: new Date(Date.now() - timeline.now() * 1000).toISOString(),
    machine: m,
    options: { seconds, sessions, minS, maxS, first, target, codec, stt: svc.stt, raw: options },
    baseline: `the service's RSS after the first ${first} sessions came and went`,
    summary: {
      head: ['figure', 'value', 'goal'],
      rows: [
        ['sessions alive at once / come and gone', `${sessions} / ${f.totals.closed}`, `${target} in ${Math.round(seconds / 60)} min`],
        ['RSS idle at start, MiB', String(mib(f.idleRss)), ''],
        [`RSS after ${first} came and went, MiB`, String(f.rssAfterFirst ? mib(f.rssAfterFirst) : '-'), ''],
        [`RSS after ${f.lateCheckpoint} came and went, MiB`, String(f.rssAfterLate ? mib(f.rssAfterLate) : '-'), ''],
        ['growth between the two', growth === null ? '-' : `${(growth * 100).toFixed(1)}%`, `≤ ${GOALS.churnRssGrowthMax * 100}%`],
        ['RSS slope over the second half, KiB per 1,000 sessions come and gone', f.slopeKiBPer1000 === null ? '-' : String(f.slopeKiBPer1000), '~0 (a leak grows with sessions)'],
        ['RSS once all left, MiB', String(mib(f.rssAfterAllLeft)), ''],
        ['main JS heap used / committed / external, malloc in use / free, MiB: after the first, the late checkpoint, once all left', [f.memAfterFirst, f.memAfterLate, f.memAfterAllLeft].map(heapCell).join('; '), ''],
        ['sessions closed early by the server / upgrades refused', `${early} / ${JSON.stringify(f.totals.refused)}`, '0 / {}'],
        ['frames lost / provider streams left open / service sessions left', `${f.drain.lostFrames ?? '-'} / ${f.drain.streamsLeftOpen ?? '-'} / ${f.liveAfterDrain}`, '0 / 0 / 0'],
        ['server CPU / generator CPU, cores', `${f.serverCores} / ${f.generatorCores}`, ''],
      ],
    },
    figures: figuresOf({
      'RSS growth first→late': [growth, '', 'lower'],
      'RSS slope second half KiB per 1000 sessions': [f.slopeKiBPer1000, 'KiB', 'lower'],
      'RSS after late checkpoint MiB': [f.rssAfterLate ? mib(f.rssAfterLate) : null, 'MiB', 'lower'],
      'RSS once all left MiB': [mib(f.rssAfterAllLeft), 'MiB', 'lower'],
      'JS heap used once all left MiB': [mib(f.memAfterAllLeft.heapUsed), 'MiB', 'lower'],
      'server cores': [f.serverCores, 'cores', 'lower'],
    }),
    goals: [
      { name: `RSS after ${f.lateCheckpoint} sessions vs after ${first}`, target: `within ${GOALS.churnRssGrowthMax * 100}%`, value: growth, met: growth === null ? null : Math.abs(growth) <= GOALS.churnRssGrowthMax },
      { name: `${target} sessions came and went`, target: `in ${seconds} s`, value: f.totals.closed, met: f.totals.closed >= target },
    ],
    notes: [svc.note, `devices pause on average every ${fleetOpts.pauseEveryS} s of audio for ${fleetOpts.pauseS} s (keep-alives only meanwhile)`].filter(Boolean),
    charts: [
      { title: 'RSS of the service', yLabel: 'MiB', lines: sampler.lines('rssMiB', (n) => n === 'service'), xDomain },
      { ...timeline.chart('done', 'Sessions come and gone', 'sessions'), xDomain },
      { ...timeline.chart('sessions', 'Streaming sessions', 'sessions'), xDomain },
      { title: 'CPU per process', yLabel: 'cores', lines: sampler.lines('cores'), xDomain },
      { ...memoryChart(timeline), xDomain },
    ],
    service: { ...f, exitCode },
  };
  finish(/** @type {any} */ (result), options);
  if (exitCode !== 0) throw new Error(`the service exited with ${exitCode} on SIGTERM`);
  return result;
}
