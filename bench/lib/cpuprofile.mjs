// Reads a V8 .cpuprofile (node --cpu-prof) and ranks self time by function and by area (package, our dirs, node internals, GC).
import { readFileSync } from 'node:fs';

/**
 * Which part of the system a script URL belongs to.
 * @param {string} url
 * @param {string} name function name, for V8's pseudo-nodes such as (garbage collector)
 */
export function area(url, name) {
  if (!url) return name.startsWith('(') ? name : '(native/builtin)';
  if (url.startsWith('node:')) return 'node:' + (url.slice(5).split('/')[1] ?? url.slice(5)).replace(/\.js$/, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1] ?? url;
  const dist = /\/dist\/([^/]+\/[^/]+)/.exec(url);
  if (dist) return dist[1] ?? url;
  return url;
}

/**
 * @param {string} file
 * @param {number} [top]
 * @returns {{ totalMs: number, busyMs: number, functions: { name: string, where: string, selfMs: number, pct: number }[], areas: { area: string, selfMs: number, pct: number }[] }}
 */
export function summarize(file, top = 15) {
  /** @type {{ nodes: { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, hitCount?: number }[], samples: number[], timeDeltas: number[] }} */
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  /** @type {Map<number, number>} */
  const selfUs = new Map();
  prof.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, prof.timeDeltas[i] ?? 0)));
  /** @type {Map<string, { name: string, where: string, us: number }>} */
  const byFn = new Map();
  /** @type {Map<string, number>} */
  const byArea = new Map();
  let total = 0;
  let idle = 0;
  for (const n of prof.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    total += us;
    const { functionName, url, lineNumber } = n.callFrame;
    const name = functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    const where = url ? `${url.replace(/^file:\/\/.*?\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}` : '';
    const key = `${name}@${where}`;
    const f = byFn.get(key) ?? { name, where, us: 0 };
    f.us += us;
    byFn.set(key, f);
    const a = area(url, name);
    byArea.set(a, (byArea.get(a) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (/** @type {number} */ us) => Math.round((us / (busy || 1)) * 1000) / 10;
  return {
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    functions: [...byFn.values()].sort((a, b) => b.us - a.us).slice(0, top).map((f) => ({ name: f.name, where: f.where, selfMs: Math.round(f.us / 1000), pct: pct(f.us) })),
    areas: [...byArea.entries()].sort((a, b) => b[1] - a[1]).slice(0, top).map(([a, us]) => ({ area: a, selfMs: Math.round(us / 1000), pct: pct(us) })),
  };
}
