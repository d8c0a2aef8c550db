import t from 'tap';
import { ManualClock } from '../../../engine/clock.js';
import { DecodeOverload } from '../../../engine/codec/overload.js';

function gate(thresholdS: number, run = 5) {
  const clock = new ManualClock();
  const changes: [boolean, number][] = [];
  const g = new DecodeOverload({ thresholdS, run, clock, onChange: (on, d) => changes.push([on, d]) });
  return { clock, changes, g, tasks: (n: number, delayS: number) => { for (let i = 0; i < n; i++) g.observe(delayS); } };
}

t.test('a run of slow decode tasks makes the node overloaded; a run of quick ones ends it', async (t) => {
  const { g, tasks, changes } = gate(1, 5);
  tasks(4, 1.5);
  t.notOk(g.overloaded, 'four tasks over the threshold are not yet a run');
  tasks(1, 1);
  t.ok(g.overloaded, 'the fifth in a row is (at the threshold counts)');
  t.same(changes, [[true, 1]], 'told once, with the delay that tipped it');
  tasks(4, 0.4);
  tasks(1, 0.6);
  t.ok(g.overloaded, 'a task over half the threshold breaks the run of quick ones');
  tasks(4, 0.4);
  t.ok(g.overloaded);
  tasks(1, 0.1);
  t.notOk(g.overloaded, 'five in a row under half the threshold end it');
  t.same(changes, [[true, 1], [false, 0.1]]);
});

t.test('one slow task among quick ones (a collector pause, a stalled host) is not overload', async (t) => {
  const { g, tasks, changes } = gate(1, 5);
  for (let i = 0; i < 50; i++) tasks(1, i % 4 === 0 ? 3 : 0.01);
  t.notOk(g.overloaded);
  t.same(changes, []);
});

t.test('a node whose decode tasks stopped (its sessions left) is not overloaded after a second of the clock', async (t) => {
  const { g, tasks, clock, changes } = gate(0.2, 3);
  tasks(3, 0.3);
  t.ok(g.overloaded);
  clock.advance(999);
  t.ok(g.overloaded, 'still, within the second');
  clock.advance(1);
  t.notOk(g.overloaded, 'no task for a second');
  t.same(changes, [[true, 0.3], [false, 0]]);
  tasks(2, 0.3);
  t.notOk(g.overloaded, 'and a new run starts from nothing');
  tasks(1, 0.3);
  t.ok(g.overloaded);
});

t.test('deep in overload, the quiet while one long task runs does not end it: twice the last delay must pass', async (t) => {
  const { g, tasks, clock } = gate(1, 3);
  tasks(3, 4);
  clock.advance(7999);
  t.ok(g.overloaded, 'a task that waited 4 s: the next may take as long');
  clock.advance(1);
  t.notOk(g.overloaded, 'nothing for 8 s');
});

t.test('threshold 0 turns it off', async (t) => {
  const { g, tasks } = gate(0, 1);
  tasks(100, 60);
  t.notOk(g.overloaded);
  t.throws(() => new DecodeOverload({ thresholdS: -1, clock: new ManualClock() }), RangeError);
});
