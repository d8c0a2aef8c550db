// Compacts the JS heap at an interval: under steady load V8 leaves ended sessions' holes in old-space pages (its memory
// reducer waits for a quiet moment that never comes). The codec threads are asked to tidy theirs at the same interval.
import v8 from 'node:v8';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import client from 'prom-client';
import type { Scheduler, TimerId } from '../scheduler.js';

/** Seconds between compactions and tidies: a churning heap stays near its use at no cost beyond other full GCs. */
export const HEAP_COMPACT_INTERVAL_S = 10;

export interface HeapCompactionOptions {
  scheduler: Scheduler;
  registry: client.Registry;
  /** Seconds between two compactions; 0 turns them off. */
  intervalS: number;
  /**
   * At each interval, asks the codec threads whose streams closed since the last one to give their heaps' free memory
   * back (CodecPool.tidyThreads(), native/memory.cc tidy()): a thread runs no full GC in the main thread's window, and
   * its streams' sockets and decoders leave holes there too. Answers how many were asked.
   */
  tidyThreads?: () => number;
}

/**
 * Turns V8's memory-saving mode on or off: full GCs that start marking in it evacuate pages with a fifth or more free,
 * not only the mostly empty ones. `--compact-on-every-full-gc` would evacuate full pages too, and pause far longer.
 * The flag is process-wide (a codec thread's full GC in the window compacts too) and read when marking starts.
 */
function saveMemory(on: boolean): void {
  v8.setFlagsFromString(on ? '--optimize-for-size' : '--no-optimize-for-size');
}

/**
 * Old space free within its committed pages at or below which a window closes after its first full GC; otherwise it
 * closes after the second (one GC in memory-saving mode moves only part of a fragmented heap).
 */
const COMPACT_FREE_SHARE = 0.1;

/** Whether the main thread's old space is compact now (read after a full GC). */
function compact(): boolean {
  const old = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space');
  return old === undefined || old.space_size - old.space_used_size <= old.space_size * COMPACT_FREE_SHARE;
}

/** A running compaction schedule. */
export interface HeapCompaction {
  /** Stops it; a window still open closes at once (the flag is process-wide and must not outlive the service). */
  close(): void;
}

/** Starts compacting; undefined when off. */
export function startHeapCompaction(o: HeapCompactionOptions): HeapCompaction | undefined {
  if (o.intervalS <= 0) return undefined;
  const runs = new client.Counter({ name: 'process_heap_compactions_total', help: 'Compactions of the JS heap: windows in which full GCs evacuated the fragmented pages', registers: [o.registry] });
  const seconds = new client.Counter({ name: 'process_heap_compaction_gc_seconds_total', help: "Main-thread time in those windows' full GCs, compaction included", registers: [o.registry] });
  let observer: PerformanceObserver | undefined;
  const closeWindow = (): void => {
    saveMemory(false);
    observer?.disconnect();
    observer = undefined;
  };
  const tidies = new client.Counter({ name: 'codec_thread_heap_tidies_total', help: 'Times a codec thread whose streams had closed was asked to give its heap\'s free memory back', registers: [o.registry] });
  const timer: TimerId = o.scheduler.every(o.intervalS * 1000, () => {
    const asked = o.tidyThreads?.() ?? 0;
    if (asked > 0) tidies.inc(asked);
    if (observer) return; // the last window's full GC has not come yet
    let seen = 0;
    // Observed only while a window is open: every scavenge would otherwise make an entry.
    const watching = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if ((e as { detail?: { kind?: number } }).detail?.kind !== constants.NODE_PERFORMANCE_GC_MAJOR || observer !== watching) continue;
        seen++;
        seconds.inc(e.duration / 1000);
        if (seen < 2 && !compact()) continue;
        closeWindow();
        runs.inc();
      }
    });
    observer = watching;
    watching.observe({ entryTypes: ['gc'] });
    saveMemory(true);
  });
  return {
    close() {
      o.scheduler.cancel(timer);
      if (observer) closeWindow();
    },
  };
}
