// Compacts the JS heap every HEAP_COMPACT_INTERVAL_S seconds: the full GCs after each tick run in V8's memory-saving
// mode, which moves the live objects of the fragmented old-space pages together, so the emptied pages go back to the
// kernel.
//
// Rationale: sessions come and go. Each leaves its objects' holes in old-space pages that also hold objects still
// alive, and V8's own heuristics only evacuate pages that are mostly empty (about 70% free when not short of memory).
// Under steady load the memory reducer, which would compact, never runs (it waits for a quiet moment). So the main
// thread's committed old space grew from 38 to 58 MiB while 30-38 MiB of it was in use, and RSS after 4,000 sessions
// had come and gone stood 19% above RSS after the first 100 (`npm run bench -- churn --seconds 240 --sessions 330`).
// Compacting once per interval held it near 10%.
//
// The window first used `--compact-on-every-full-gc`, which evacuates every page, full ones too: at 450 streaming
// sessions its GC stopped the main thread for 35-43 ms at every window, against 2-10 ms for other full GCs, and each
// such pause was followed by a 2-s stretch whose frame-latency p99 was 73-161 ms (8-14 s apart, as the windows were).
// `--optimize-for-size`, held as long as the window, makes V8 evacuate pages with a fifth or more free, a few MiB of
// live objects per GC (a 24 MiB heap of half-empty pages takes two GCs): its window GCs paused 5-12 ms, once 19. A
// window lasts one or two full GCs, which at that load (one every ~4 s) is most of the time: 10 of 13 full GCs ran in
// that mode. Neither CPU per session nor the 10-min churn's growth moved beyond the runs' noise.
//
// The flag is process-wide: a codec thread's full GC inside the window compacts too (their heaps are small). V8 reads it
// when a full GC starts marking, so a GC already marking when the window opened (measured: 1 in 6 at 330 sessions)
// compacts only by its own heuristics; the window closes after the first full GC that left old space compact (at most
// 10% of it free), or after a second one whatever it left.
//
// The codec threads are asked at the same interval (those whose streams closed since the last one) to give their
// heaps' free memory back: native/memory.cc tidy() tells the thread's own isolate of moderate memory pressure, so V8
// starts incremental marking there at once with its memory reducer's flags, and that GC evacuates fragmented pages.
// Rationale: each stream leaves its provider socket's and decoders' objects in a thread's old space, and V8 left them
// there (the main thread's window above does not reach a thread that runs no full GC in it): the two threads'
// committed heaps grew from 21.0 to 34.7 MiB over a 10-min churn while 16.5-24.3 MiB of it was in use;
// RSS after 10,000 sessions stood 15.4% above RSS after the first 100. Tidied every 10 s: 19.5 to 20.7 MiB, 5.5%, and
// the RSS slope over the second half fell from 392 to 5 KiB per 1,000 sessions (`npm run bench -- churn`, one run
// each; server CPU 0.73 and 0.70 cores). It is one message per thread and interval, and incremental marking.
import v8 from 'node:v8';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import client from 'prom-client';
import type { Scheduler, TimerId } from '../scheduler.js';

export interface HeapCompactionOptions {
  scheduler: Scheduler;
  registry: client.Registry;
  /** Seconds between two compactions; 0 turns them off. */
  intervalS: number;
  /**
   * At each interval, asks the codec threads whose streams closed since the last one to give their heaps' free memory
   * back (CodecPool.tidyThreads()); answers how many were asked.
   */
  tidyThreads?: () => number;
}

/**
 * Turns V8's memory-saving mode on or off; full GCs that start marking in it evacuate the pages a fifth free or more
 * (a few MiB of live objects per GC), instead of only the ~70% free pages of its speed-first heuristics.
 */
function saveMemory(on: boolean): void {
  v8.setFlagsFromString(on ? '--optimize-for-size' : '--no-optimize-for-size');
}

/**
 * Old space free within its committed pages at or below which a window closes after its first full GC. In
 * memory-saving mode one GC usually leaves more (pages under a fifth free stay, and V8 moves a few MiB per GC), so at
 * load most windows last two full GCs.
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
  const runs = new client.Counter({ name: 'process_heap_compactions_total', help: 'Compactions of the JS heap (HEAP_COMPACT_INTERVAL_S): windows in which full GCs evacuated the fragmented pages', registers: [o.registry] });
  const seconds = new client.Counter({ name: 'process_heap_compaction_gc_seconds_total', help: "Main-thread time in those windows' full GCs, compaction included", registers: [o.registry] });
  let observer: PerformanceObserver | undefined;
  const closeWindow = (): void => {
    saveMemory(false);
    observer?.disconnect();
    observer = undefined;
  };
  const tidies = new client.Counter({ name: 'codec_thread_heap_tidies_total', help: 'Times a codec thread whose streams had closed was asked to give its heap\'s free memory back (HEAP_COMPACT_INTERVAL_S)', registers: [o.registry] });
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
