// Finds and loads one of the N-API addons native/binding.gyp builds into native/build/Release.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const requireAddon = createRequire(import.meta.url);

/**
 * Loads `native/build/Release/<name>.node`, or answers undefined when it is not built. Compiled to dist/native/, this
 * file's source sits at native/: both places are looked in, so tests and workers find the one build.
 */
export function loadOptionalAddon<T>(name: string): T | undefined {
  const found = [path.join(here, `build/Release/${name}.node`), path.join(here, `../../native/build/Release/${name}.node`)].find((p) => existsSync(p));
  return found === undefined ? undefined : (requireAddon(found) as T);
}

/** loadOptionalAddon(), throwing a message that says how to build it (`label` names it) when it is missing. */
export function loadAddon<T>(name: string, label: string): T {
  const addon = loadOptionalAddon<T>(name);
  if (addon === undefined) throw new Error(`${label} addon not built: run \`npm run setup\` (native/build/Release/${name}.node)`);
  return addon;
}
