// What fails a capacity ramp step (bench/listen/measure.mjs stepFailures), on either side alike; how many generator
// processes a run starts (device-fleet.mjs defaultGenerators); and where the per-thread CPU table reads its steps
// (ramp-report.mjs threadTable, procstat.mjs threadCores).
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/bench.js';

const load = async <T>(file: string): Promise<T> => (await import(pathToFileURL(path.join(ROOT, file)).href)) as T;
const { stepFailures, RAMP_P99_MS } = await load<{ stepFailures: (w: object, n: number, opened: boolean) => string[]; RAMP_P99_MS: number }>('bench/listen/measure.mjs');
const { defaultGenerators } = await load<{ defaultGenerators: (devices: number, box?: { cores?: number; load?: number }) => number }>('bench/listen/device-fleet.mjs');
const { threadTable } = await load<{ threadTable: (fleet: object, limit: object) => { head: string[]; rows: string[][] } }>('bench/listen/ramp-report.mjs');
const { threadCores } = await load<{ threadCores: (pid: number, a: Map<number, { name: string; cpuS: number }>, b: Map<number, { name: string; cpuS: number }>, s: number) => { thread: string; cores: number }[] }>('bench/lib/procstat.mjs');

/** A window that passes every criterion; `over` changes some of it. */
const window = (over: object = {}) => ({ lag: { p99: 80 }, lateness: { p99: 3 }, receivedShare: 0.999, shortMsPerSession: 20, backlogMaxMs: 40, unexpectedCloses: 0, statsTimeouts: 0, stoppedEarly: false, ...over });

t.test('a window within every criterion passes', async (t) => {
  t.same(stepFailures(window(), 800, true), []);
});

t.test('each criterion fails a step on its own, with a reason an operator can read', async (t) => {
  const cases: [object, boolean, RegExp][] = [
    [{}, false, /not all 800 streaming/],
    [{ unexpectedCloses: 2 }, true, /2 closed/],
    [{ lag: { p99: RAMP_P99_MS } }, true, new RegExp(`p99 ≥ ${RAMP_P99_MS} ms`)],
    [{ lag: { p99: null } }, true, /p99/],
    [{ receivedShare: 0.97, shortMsPerSession: 1800 }, true, /97% of the audio arrived/],
    [{ backlogMaxMs: 1500 }, true, /1500 ms behind in sending/],
    [{ lateness: { p99: 120 } }, true, /generator late \(p99 120 ms\)/],
    [{ statsTimeouts: 1 }, true, /not answered/],
  ];
  for (const [over, opened, why] of cases) {
    const got = stepFailures(window(over), 800, opened);
    t.equal(got.length, 1, JSON.stringify(over));
    t.match(got[0], why);
  }
});

t.test('a short window of few sessions is not failed by the audio still in flight at its ends', async (t) => {
  // 2 sessions for 2 s: 4 s of audio sent, 0.3 s of it still on its way (decoder and send plan) at the last read.
  t.same(stepFailures(window({ receivedShare: 0.925, shortMsPerSession: 150 }), 2, true), []);
});

t.test('generator processes: more devices take more processes, a busy box more still, within bounds', async (t) => {
  t.equal(defaultGenerators(100, { cores: 2, load: 0 }), 1);
  t.equal(defaultGenerators(1500, { cores: 2, load: 0.5 }), 4);
  t.equal(defaultGenerators(3000, { cores: 2, load: 1 }), 8);
  t.ok(defaultGenerators(1500, { cores: 2, load: 8 }) > defaultGenerators(1500, { cores: 2, load: 0.5 }), 'a box four times over its cores: fewer devices per process');
  t.equal(defaultGenerators(100_000, { cores: 2, load: 40 }), 16, 'at most 16');
});

t.test('per-thread cores: the main thread, each codec thread by name, the rest together', async (t) => {
  const before = new Map([[100, { name: 'node', cpuS: 10 }], [101, { name: 'node', cpuS: 1 }], [120, { name: 'task-decode', cpuS: 2 }]]);
  const after = new Map([[100, { name: 'node', cpuS: 16 }], [101, { name: 'node', cpuS: 2 }], [120, { name: 'task-decode', cpuS: 6 }], [121, { name: 'task-decode', cpuS: 3 }], [130, { name: 'node', cpuS: 1 }]]);
  t.same(threadCores(100, before, after, 10), [
    { thread: 'main', cores: 0.6 },
    { thread: 'task-decode 1', cores: 0.4 },
    { thread: 'task-decode 2', cores: 0.3 },
    { thread: 'V8 and libuv helpers', cores: 0.2 },
  ]);
});

t.test('the per-thread table reads the passing step nearest 800 and the capacity step of each side', async (t) => {
  const threads = (main: number) => [{ thread: 'main', cores: main }, { thread: 'V8 and libuv helpers', cores: 0.1 }];
  const step = (sessions: number, pass: boolean, main: number) => ({ sessions, pass, threads: threads(main), wallS: 60, engine: { gcS: 3, loopLagP99Ms: 20 }, messageMs: 100 });
  const fleet = { capacity: 850, steps: [step(600, true, 0.5), step(800, true, 0.7), step(900, false, 0.9), step(850, true, 0.75)] };
  const limit = { capacity: 1400, steps: [step(600, true, 0.4), step(800, true, 0.55), step(1350, true, 0.9), step(2050, false, 1), step(1400, true, 0.95)] };
  const table = threadTable(fleet, limit);
  t.same(table.head, ['thread', 'service at 800', 'service at 850 (capacity)', 'bare at 800', 'bare at 1400 (capacity)']);
  t.same(table.rows[0], ['main', '0.7 (875)', '0.75 (882)', '0.55 (688)', '0.95 (679)'], 'cores and µs per session-second');
  t.match(table.rows.map((r) => r[0]).join('\n'), /garbage collection[\s\S]*event-loop delay[\s\S]*PCM per message/);
});
