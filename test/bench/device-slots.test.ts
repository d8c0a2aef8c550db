// How the device generator spreads a step's sessions over its processes (bench/listen/device-fleet.mjs slotShare):
// the first processes fill first, so a ramp's small steps do not run on every process its largest step needs.
import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/bench.js';

const { slotShare } = (await import(pathToFileURL(path.join(ROOT, 'bench/listen/device-fleet.mjs')).href)) as {
  slotShare: (count: number, perGenerator: number, i: number) => number;
};

/** The shares of generators 0…g-1 for `count` of `devices` slots, as DeviceFleet sizes them. */
const shares = (count: number, devices: number, g: number): number[] => Array.from({ length: g }, (_, i) => slotShare(count, Math.ceil(devices / g), i));

t.test('a ramp to 3,000 (five generators): 400 sessions on one process, 1,000 on two', async (t) => {
  t.same(shares(400, 3000, 5), [400, 0, 0, 0, 0]);
  t.same(shares(1000, 3000, 5), [600, 400, 0, 0, 0]);
  t.same(shares(3000, 3000, 5), [600, 600, 600, 600, 600], 'the largest step uses every process, evenly');
});

t.test('every slot belongs to exactly one generator, for any count up to the devices', async (t) => {
  for (const [devices, g] of [[1001, 2], [7, 3], [5, 5], [2, 4]] as const) {
    const wrong: string[] = [];
    for (let count = 0; count <= devices; count++) {
      const s = shares(count, devices, g);
      const fits = s.every((x) => x >= 0 && x <= Math.ceil(devices / g));
      if (s.reduce((a, b) => a + b, 0) !== count || !fits) wrong.push(`${count}: ${s.join(', ')}`);
    }
    t.same(wrong, [], `${devices} devices over ${g} generators`);
  }
});
