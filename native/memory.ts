// Typed loader for the malloc_trim addon (native/memory.cc); absent or not glibc, trim() does nothing.
import { loadOptionalAddon } from './addon.js';

interface NativeMemory {
  trim(): boolean;
}

const addon = loadOptionalAddon<NativeMemory>('memory');

/** Whether the addon is built (trim() can release anything). */
export const canTrim = addon !== undefined;

/** Gives memory malloc keeps after free() back to the kernel; true if any was released. */
export function trimMalloc(): boolean {
  return addon?.trim() ?? false;
}
