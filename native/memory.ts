// Typed loader for the malloc_trim addon (native/memory.cc); absent or not glibc, trim() does nothing.
import { loadOptionalAddon } from './addon.js';

/** Where glibc's malloc memory is, summed over every arena (mallinfo2). */
export interface MallocStats {
  /** Bytes handed out from the arenas and not freed. */
  inUseBytes: number;
  /** Bytes handed out as their own mmapped chunks (large allocations); always in use. */
  mmappedBytes: number;
  /** Bytes free inside the arenas: kept for reuse, or already given back by malloc_trim (still counted here). */
  freeBytes: number;
}

interface NativeMemory {
  trim(): boolean;
  stats(): MallocStats | undefined;
  tidy(): void;
}

const addon = loadOptionalAddon<NativeMemory>('memory');

/** Whether the addon is built (trim() can release anything). */
export const canTrim = addon !== undefined;

/** Gives memory malloc keeps after free() back to the kernel; true if any was released. */
export function trimMalloc(): boolean {
  return addon?.trim() ?? false;
}

/**
 * Asks the calling thread's V8 heap for memory back (moderate memory pressure): V8 starts incremental marking at once,
 * and that full GC evacuates fragmented pages and returns the emptied ones. False when the addon is absent.
 */
export function tidyHeap(): boolean {
  if (addon === undefined) return false;
  addon.tidy();
  return true;
}

/** malloc's own accounting, or undefined when the addon is absent or not on glibc. */
export function mallocStats(): MallocStats | undefined {
  return addon?.stats();
}
