// Which steps of a capacity ramp the CPU-per-session ratio compares (bench/listen/ramp-report.mjs cpuComparison).
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/bench.js';

interface Step {
  sessions: number;
  pass: boolean;
  serverCpuUsPerSessionS: number;
}
type Search = { capacity: number; steps: Step[] };
const { cpuComparison } = (await import(pathToFileURL(path.join(ROOT, 'bench/listen/ramp-report.mjs')).href)) as {
  cpuComparison: (fleet: Search, limit: Search) => { svc: Step | undefined; bare: Step | undefined };
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
  // 2026-11-27's ramp: the service failed 500 (which the bare server passed) and held 475.
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
