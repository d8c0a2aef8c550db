// Which steps of a capacity ramp the CPU-per-session ratio compares (bench/listen/ramp-report.mjs cpuComparison), and
// what `fleet --rounds` makes of its rounds (roundsComparison); `--rounds` refuses what it cannot do.
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, runBench } from '../helpers/bench.js';

interface Step {
  sessions: number;
  pass: boolean;
  serverCpuUsPerSessionS: number;
}
type Search = { capacity: number; steps: Step[] };
interface Round extends Step {
  heldAgain?: boolean;
  rssMiB?: number;
  lag?: { p99: number };
}
interface Spread {
  median: number | null;
  min: number | null;
  max: number | null;
}
const { cpuComparison, roundsComparison } = (await import(pathToFileURL(path.join(ROOT, 'bench/listen/ramp-report.mjs')).href)) as {
  cpuComparison: (fleet: Search, limit: Search) => { svc: Step | undefined; bare: Step | undefined };
  roundsComparison: (
    fleet: { steps: Round[] },
    limit: { steps: Round[] },
    idleRss: number,
  ) => { svc: Spread; bare: Spread; ratio: number | null; perRound: (number | null)[]; rssPerSession: number | null; passed: { svc: number; bare: number; rounds: number }; p99: { svc: (number | null)[]; bare: (number | null)[] }; rssMiB: { idle: number; svc: (number | null)[]; bare: (number | null)[] } };
};

const step = (sessions: number, pass: boolean, us: number): Step => ({ sessions, pass, serverCpuUsPerSessionS: us });

t.test('the largest N both passed', async (t) => {
  const fleet = { capacity: 675, steps: [step(500, true, 2213), step(750, false, 2300), step(625, true, 2100), step(675, true, 2050)] };
  const limit = { capacity: 850, steps: [step(500, true, 1501), step(750, true, 1300), step(625, true, 1400), step(850, true, 1200)] };
  const at = cpuComparison(fleet, limit);
  t.equal(at.svc?.sessions, 625);
  t.equal(at.bare?.sessions, 625);
});

t.test("no N both passed: the service's capacity against the bare server's next passing step up", async (t) => {
  // A real ramp's steps: the service failed 500 (which the bare server passed) and held 475.
  const fleet = { capacity: 475, steps: [step(500, false, 2290), step(250, true, 2648), step(375, true, 2293), step(450, true, 2449), step(475, true, 2074)] };
  const limit = { capacity: 825, steps: [step(500, true, 1630), step(750, true, 1295), step(1150, false, 780), step(950, false, 963), step(850, false, 1132), step(800, true, 1244), step(825, true, 1185)] };
  const at = cpuComparison(fleet, limit);
  t.equal(at.svc?.sessions, 475);
  t.equal(at.bare?.sessions, 500, 'not the bare capacity (825), where a session costs it less');
});

t.test('the bare server passed nothing at or above the service: the two capacities', async (t) => {
  const fleet = { capacity: 300, steps: [step(300, true, 2000), step(450, false, 2100)] };
  const limit = { capacity: 200, steps: [step(300, false, 1500), step(200, true, 1600)] };
  const at = cpuComparison(fleet, limit);
  t.equal(at.svc?.sessions, 300);
  t.equal(at.bare?.sessions, 200);
});

t.test('a search that passed nothing compares nothing', async (t) => {
  const at = cpuComparison({ capacity: 0, steps: [step(100, false, 3000)] }, { capacity: 0, steps: [step(100, false, 2000)] });
  t.equal(at.svc, undefined);
  t.equal(at.bare, undefined);
});

t.test('--rounds: medians of each side, the ratio of the medians, each round against its neighbour', async (t) => {
  const round = (us: number, pass: boolean, p99: number, rssMiB: number, heldAgain = false): Round => ({ sessions: 400, pass, serverCpuUsPerSessionS: us, heldAgain, rssMiB, lag: { p99 } });
  const fleet = {
    steps: [round(2070, true, 24.7, 157), round(2300, false, 130, 160, true), round(2236, false, 120, 158), round(2098, true, 46.7, 156)],
  };
  const limit = { steps: [round(1293, true, 9.3, 70), round(1460, true, 3.6, 71), round(1243, true, 5, 70)] };
  const r = roundsComparison(fleet, limit, 107 * 2 ** 20);
  t.same(r.svc, { median: 2098, min: 2070, max: 2236 }, 'the round held again is left out (its next window is the round)');
  t.same(r.bare, { median: 1293, min: 1243, max: 1460 });
  t.equal(r.ratio, 1.62, 'median against median');
  t.same(r.perRound, [1.6, 1.53, 1.69], 'round by round');
  t.equal(r.rssPerSession, 128, 'median RSS per session over the rounds: (157 MiB - 107 MiB) / 400');
  t.same(r.passed, { svc: 2, bare: 3, rounds: 3 });
  t.same(r.p99, { svc: [24.7, 120, 46.7], bare: [9.3, 3.6, 5] });
  t.same(r.rssMiB, { idle: 107, svc: [157, 158, 156], bare: [70, 71, 70] }, 'RSS by round, beside the idle level');
});

t.test('--rounds refuses nonsense before starting anything', async (t) => {
  for (const [args, message] of [
    [['--rounds', '0'], /--rounds must be at least 1/],
    [['--rounds', '2', '--ramp'], /--rounds goes with neither --ramp nor --open-rate/],
    [['--rounds', '2', '--open-rate', '5'], /--rounds goes with neither --ramp nor --open-rate/],
  ] as const) {
    const run = await runBench(['fleet', ...args], 30_000);
    t.not(run.code, 0, `fleet ${args.join(' ')} fails`);
    t.match(run.stderr, message);
  }
});
