// tidyHeap() (native/memory.cc): a thread that asks for its memory back gets a full GC started at once, and that GC
// evacuates the fragmented pages and returns the emptied ones. Real V8, in a worker thread like a codec shard's.
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { canTrim } from '../../../native/memory.js';

/** Old space of the worker, committed and free bytes, at three moments. */
interface Report {
  fragmented: { committed: number; free: number };
  idle: { committed: number; free: number; majorGcs: number };
  tidied: { committed: number; free: number; majorGcs: number };
  /** Event-loop turns from tidyHeap() to the GC's entry. */
  waited: number;
}

// The worker fragments its old space (every other object of ~24 MiB dropped), idles for a few turns to show V8 leaves
// it so, then calls tidyHeap() and reports after the next full GC.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const v8 = require('node:v8');
const vm = require('node:vm');
const { PerformanceObserver, constants } = require('node:perf_hooks');
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
const old = () => {
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'old_space');
  return { committed: s.space_size, free: s.space_size - s.space_used_size };
};
const turns = (n) => new Promise((resolve) => { let i = 0; const next = () => (++i > n ? resolve() : setImmediate(next)); next(); });
(async () => {
  const { tidyHeap } = await import(workerData.memory);
  let majorGcs = 0;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.detail && e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcs++;
  }).observe({ entryTypes: ['gc'] });
  const objects = Array.from({ length: 400000 }, (_, i) => ({ id: i, tag: 'object ' + i }));
  gc();
  gc();
  for (let i = 0; i < objects.length; i += 2) objects[i] = undefined;
  gc();
  const fragmented = old();
  await turns(20);
  majorGcs = 0;
  const idle = { ...old(), majorGcs };
  parentPort.postMessage({ tidied: tidyHeap() });
  // V8 marks in tasks on this thread's loop; the GC's entry arrives a turn after it. Bounded in turns, not time, so a
  // GC that never comes fails the assertions instead of hanging (it came 2 turns later here).
  let waited = 0;
  while (majorGcs === 0 && waited < 100000) {
    await turns(1);
    waited++;
  }
  await turns(5);
  parentPort.postMessage({ report: { fragmented, idle, tidied: { ...old(), majorGcs }, waited }, kept: objects.length });
})();
`;

t.test('tidyHeap() starts a full GC in the calling thread that gives fragmented pages back', { skip: canTrim ? false : 'native/build/Release/memory.node is not built' }, async (t) => {
  const memory = new URL('../../../native/memory.js', import.meta.url).href;
  const worker = new Worker(WORKER, { eval: true, workerData: { memory } });
  t.teardown(() => worker.terminate());
  let tidied: boolean | undefined;
  const report = await new Promise<Report>((resolve, reject) => {
    worker.on('error', reject);
    worker.on('message', (m: { tidied?: boolean; report?: Report }) => {
      if (m.tidied !== undefined) tidied = m.tidied;
      if (m.report) resolve(m.report);
    });
  });
  t.equal(tidied, true, 'the addon took the request');
  const { fragmented, idle, tidied: after, waited } = report;
  t.ok(fragmented.free > fragmented.committed * 0.3, `V8 alone leaves the holes: ${fragmented.free} of ${fragmented.committed} bytes free`);
  t.equal(idle.majorGcs, 0, 'an idle thread runs no full GC by itself');
  t.ok(idle.free > idle.committed * 0.3, `nor compacts: ${idle.free} of ${idle.committed} bytes free`);
  t.ok(after.majorGcs >= 1, `tidyHeap() started one (${waited} turns later)`);
  t.ok(after.committed < fragmented.committed - 4 * 1024 * 1024, `it gave pages back: ${after.committed} of ${fragmented.committed} bytes committed`);
});
