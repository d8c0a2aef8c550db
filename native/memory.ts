// Typed loader for the malloc_trim addon (native/memory.cc); absent or not glibc, trim() does nothing.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

interface NativeMemory {
  trim(): boolean;
}

// Compiled to dist/native/memory.js, the source sits at native/; look in both (as native/index.ts does).
function load(): NativeMemory | undefined {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const found = [path.join(here, 'build/Release/memory.node'), path.join(here, '../../native/build/Release/memory.node')].find((p) => existsSync(p));
  return found === undefined ? undefined : (createRequire(import.meta.url)(found) as NativeMemory);
}

const addon = load();

/** Whether the addon is built (trim() can release anything). */
export const canTrim = addon !== undefined;

/** Gives memory malloc keeps after free() back to the kernel; true if any was released. */
export function trimMalloc(): boolean {
  return addon?.trim() ?? false;
}
