import t from 'tap';
import v8 from 'node:v8';
import vm from 'node:vm';
import client from 'prom-client';
import { ManualClock } from '../../../engine/clock.js';
import { Scheduler } from '../../../engine/scheduler.js';
import { registerMallocMetrics, startMemoryTrim } from '../../../engine/runtime/memory-trim.js';
import { canTrim, trimMalloc } from '../../../native/memory.js';

t.test('trims every interval on the scheduler and counts runs and time; 0 turns it off', async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const registry = new client.Registry();
  let calls = 0;
  const id = startMemoryTrim({ scheduler, registry, intervalS: 10, trim: () => ++calls % 2 === 1 });
  t.ok(id !== undefined);
  for (let s = 1; s <= 30; s++) {
    clock.advance(1000);
    await scheduler.tick();
  }
  t.equal(calls, 3, 'once per 10 s');
  const text = await registry.metrics();
  t.match(text, /process_malloc_trims_total\{released="true"\} 2/);
  t.match(text, /process_malloc_trims_total\{released="false"\} 1/);
  t.match(text, /process_malloc_trim_seconds_total \d/);
  const off = startMemoryTrim({ scheduler, registry: new client.Registry(), intervalS: 0, trim: () => t.fail('must not run') });
  t.equal(off, undefined, 'interval 0: no scheduler entry');
});

t.test('the native trim gives freed memory back to the kernel', async (t) => {
  t.ok(canTrim, 'native/build/Release/memory.node is built');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  // 64 MiB of 16 KiB buffers on the C heap; one in eight stays, so the freed ones are holes malloc cannot return by itself.
  let all: Buffer[] | undefined = Array.from({ length: 4096 }, () => Buffer.alloc(16 * 1024, 1));
  const kept = all.filter((_, i) => i % 8 === 0);
  all = undefined;
  gc();
  gc();
  const before = process.memoryUsage.rss();
  t.equal(trimMalloc(), true, 'memory was released');
  const after = process.memoryUsage.rss();
  t.ok(before - after > 20 * 1024 * 1024, `RSS ${(before / 2 ** 20).toFixed(0)} MiB → ${(after / 2 ** 20).toFixed(0)} MiB`);
  t.equal(kept.length, 512, 'the kept buffers are intact');
  t.ok(kept.every((b) => b[0] === 1 && b[16 * 1024 - 1] === 1));
});

t.test("malloc's accounting is on /metrics and follows native allocations", async (t) => {
  const registry = new client.Registry();
  t.equal(registerMallocMetrics(registry), true, 'glibc: the gauge is registered');
  const inUse = async () => Number(/process_malloc_bytes\{state="in_use"\} (\d+)/.exec(await registry.metrics())?.[1]);
  const before = await inUse();
  // 16 MiB in 4 KiB buffers: below malloc's mmap threshold, so they come from the arenas.
  const held = Array.from({ length: 4096 }, () => Buffer.alloc(4096, 1));
  const during = await inUse();
  t.ok(during - before >= 15 * 1024 * 1024, `in use ${(before / 2 ** 20).toFixed(1)} → ${(during / 2 ** 20).toFixed(1)} MiB`);
  t.match(await registry.metrics(), /process_malloc_bytes\{state="mmapped"\} \d+\nprocess_malloc_bytes\{state="free"\} \d+/);
  t.equal(held.length, 4096);
  t.equal(registerMallocMetrics(new client.Registry(), () => undefined), false, 'nothing registered where malloc cannot say');
});
