// Periodic heap compaction: a window opens every interval on the scheduler, the next full GCs evacuate the fragmented
// pages (real V8, this process's heap), and full GCs outside a window leave fragmentation to V8's own heuristics.
import t from 'tap';
import v8 from 'node:v8';
import vm from 'node:vm';
import client from 'prom-client';
import { ManualClock } from '../../../engine/clock.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { startHeapCompaction } from '../../../engine/runtime/heap-compaction.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** The main thread's old space after a full GC: committed and used bytes. */
function oldSpace(): { committed: number; free: number } {
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'old_space')!;
  return { committed: s.space_size, free: s.space_size - s.space_used_size };
}

/** PerformanceObserver entries arrive on a later turn of the event loop (two here; five for margin). */
async function observed(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * ~24 MiB of small objects promoted to old space, then every other one dropped and a full GC: half-empty pages
 * throughout, which V8's own heuristics leave as they are. Returns the survivors' array (holes as undefined).
 */
function halfEmptyPages(): ({ id: number; tag: string } | undefined)[] {
  const objects: ({ id: number; tag: string } | undefined)[] = Array.from({ length: 400_000 }, (_, i) => ({ id: i, tag: `object ${i}` }));
  gc();
  gc();
  for (let i = 0; i < objects.length; i += 2) objects[i] = undefined;
  gc();
  return objects;
}

t.test('a window every interval compacts the next full GC; other full GCs do not', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const registry = new client.Registry();
  const compaction = startHeapCompaction({ scheduler, registry, intervalS: 20 });
  t.ok(compaction !== undefined);
  t.teardown(() => compaction?.close());

  let objects = halfEmptyPages();
  const fragmented = oldSpace();
  t.ok(fragmented.free > fragmented.committed * 0.2, `V8 alone leaves the holes: ${fragmented.free} of ${fragmented.committed} bytes free`);

  clock.advance(19_000);
  await scheduler.tick();
  gc();
  await observed();
  t.match(await registry.metrics(), /process_heap_compactions_total 0/, 'no window before the interval');

  clock.advance(1000);
  await scheduler.tick();
  gc();
  await observed();
  const once = oldSpace();
  t.ok(once.committed < fragmented.committed - 4 * 1024 * 1024, `the window's first full GC gave pages back: ${once.committed} of ${fragmented.committed} bytes committed`);
  // V8 moves a few MiB of live objects per GC in this mode: ~12 MiB takes two, the window stays open for the second.
  gc();
  await observed();
  const compacted = oldSpace();
  t.ok(compacted.free <= compacted.committed * 0.1, `compacted: ${compacted.free} of ${compacted.committed} bytes free`);
  t.ok(compacted.committed < fragmented.committed - fragmented.free / 2, 'the emptied pages were given back');
  const text = await registry.metrics();
  t.match(text, /process_heap_compactions_total 1/);
  t.match(text, /process_heap_compaction_gc_seconds_total 0\.\d*[1-9]/, 'its GC time is counted');

  // The window closed with its GC: new holes stay until the next interval.
  objects = objects.filter((o) => o !== undefined);
  for (let i = 0; i < objects.length; i += 2) objects[i] = undefined;
  gc();
  await observed();
  const after = oldSpace();
  t.ok(after.free > compacted.free + 4 * 1024 * 1024, `outside a window the new holes stay: ${after.free} of ${after.committed} bytes free`);
  t.match(await registry.metrics(), /process_heap_compactions_total 1/);
  t.ok(objects.length > 0);
});

t.test('close() with a window open turns the flag off at once', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const registry = new client.Registry();
  const compaction = startHeapCompaction({ scheduler, registry, intervalS: 10 })!;
  clock.advance(10_000);
  await scheduler.tick(); // the window is open; no full GC yet
  compaction.close();
  const objects = halfEmptyPages();
  await observed();
  const left = oldSpace();
  t.ok(left.free > 4 * 1024 * 1024, `the holes stay: ${left.free} of ${left.committed} bytes free`);
  t.match(await registry.metrics(), /process_heap_compactions_total 0/);
  clock.advance(30_000);
  await scheduler.tick();
  gc();
  await observed();
  const later = oldSpace();
  // V8 may compact a few pages by itself; a window would have left 1-2 MiB free (the first test's compacted state).
  t.ok(later.free > 4 * 1024 * 1024, `no window opens after close(): ${later.free} of ${later.committed} bytes free`);
  t.ok(objects.length > 0);
});

t.test('interval 0 turns it off', async (t) => {
  const scheduler = new Scheduler({ clock: new ManualClock(), resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  t.equal(startHeapCompaction({ scheduler, registry: new client.Registry(), intervalS: 0 }), undefined);
});

t.test('each interval asks the codec threads to tidy their heaps, and counts the threads asked', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const registry = new client.Registry();
  const answers = [2, 0, 1];
  let calls = 0;
  const compaction = startHeapCompaction({ scheduler, registry, intervalS: 10, tidyThreads: () => answers[calls++] ?? 0 });
  t.teardown(() => compaction?.close());
  for (let s = 1; s <= 30; s++) {
    clock.advance(1000);
    await scheduler.tick();
  }
  t.equal(calls, 3, 'once per 10 s, with a window of the main thread open or not');
  t.match(await registry.metrics(), /codec_thread_heap_tidies_total 3/);
});
