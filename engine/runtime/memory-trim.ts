// Hands freed malloc memory back to the kernel at an interval (native/memory.cc says why), with its cost and effect as
// metrics an operator can read.
import client from 'prom-client';
import type { Scheduler, TimerId } from '../scheduler.js';
import { canTrim, mallocStats, trimMalloc, type MallocStats } from '../../native/memory.js';

/** Seconds between two trims: malloc_trim walks every arena, so seconds apart and never per session. */
export const MALLOC_TRIM_INTERVAL_S = 10;

export interface MemoryTrimOptions {
  scheduler: Scheduler;
  registry: client.Registry;
  /** Seconds between two trims; 0 turns trimming off. */
  intervalS: number;
  /** Test seam: the trim itself. @defaultValue the native malloc_trim(0) */
  trim?: () => boolean;
}

/** Starts trimming; returns the scheduler entry (cancel it to stop), or undefined when off or unavailable. */
export function startMemoryTrim(o: MemoryTrimOptions): TimerId | undefined {
  const trim = o.trim ?? (canTrim ? trimMalloc : undefined);
  if (o.intervalS <= 0 || trim === undefined) return undefined;
  const seconds = new client.Counter({ name: 'process_malloc_trim_seconds_total', help: 'Main-thread time spent handing freed malloc memory back to the kernel', registers: [o.registry] });
  const runs = new client.Counter({ name: 'process_malloc_trims_total', help: 'malloc_trim runs, by whether they released memory', labelNames: ['released'], registers: [o.registry] });
  return o.scheduler.every(o.intervalS * 1000, () => {
    const t0 = process.hrtime.bigint();
    const released = trim();
    seconds.inc(Number(process.hrtime.bigint() - t0) / 1e9);
    runs.inc({ released: String(released) });
  });
}

/**
 * `process_malloc_bytes{state}`: native memory as malloc counts it, read at each scrape. RSS beyond the JS heap is
 * in_use + mmapped (held by the addons, sqlite, uWS, OpenSSL) or free (kept by the arenas until a trim).
 * Nothing is registered where malloc cannot say (no addon, not glibc).
 */
export function registerMallocMetrics(registry: client.Registry, stats: () => MallocStats | undefined = mallocStats): boolean {
  if (stats() === undefined) return false;
  new client.Gauge({
    name: 'process_malloc_bytes',
    help: "Native memory by malloc's own accounting: in use from the arenas, in use as mmapped chunks, free in the arenas",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const m = stats();
      if (!m) return;
      this.set({ state: 'in_use' }, m.inUseBytes);
      this.set({ state: 'mmapped' }, m.mmappedBytes);
      this.set({ state: 'free' }, m.freeBytes);
    },
  });
  return true;
}
