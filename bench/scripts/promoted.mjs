// What outlives the young generation in a running service, by allocation site (V8's sampling heap profiler, samples a
// scavenge collected dropped): those bytes fill the old space and cause full GCs, so a site high here costs CPU.
// Start the service with an inspector port, e.g. under a fleet run, and sample while it streams:
//   BENCH_SERVICE_NODE_ARGS=--inspect=127.0.0.1:9339 npm run bench -- fleet --sessions 800 --seconds 60 &
//   node bench/scripts/promoted.mjs --port 9339 --seconds 12
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ROOT_DIR, parseArgs } from '../lib/report.mjs';

export const USAGE = `node bench/scripts/promoted.mjs --port N [--seconds 12] [--top 30] [--all] [--out profile.json]
  --port      the inspector port of the process (node --inspect=127.0.0.1:N)
  --seconds   how long to sample (default 12)
  --top       sites listed (default 30)
  --interval  mean bytes between two samples (default 8192)
  --all       every allocation, those a scavenge collected included (the allocation rate, not what outlives it)
  --out       also write the raw sampling profile (JSON) there`;

const WebSocket = createRequire(path.join(ROOT_DIR, 'package.json'))('ws');

/**
 * @typedef {{ callFrame: { functionName: string, url: string, lineNumber: number }, selfSize: number, children: ProfileNode[] }} ProfileNode
 */

/** A frame as `function file:line`, the file relative to dist/ or node_modules/. */
function frameName(/** @type {ProfileNode['callFrame']} */ cf) {
  return `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/(dist|node_modules)\//, '')}:${cf.lineNumber + 1}`;
}

/**
 * Sampled bytes by allocation site: the allocating frame and its two callers.
 * @param {ProfileNode} head
 * @returns {[string, number][]} largest first
 */
export function bySite(head) {
  /** @type {Map<string, number>} */
  const sites = new Map();
  /** @param {ProfileNode} node @param {string[]} callers nearest last */
  const walk = (node, callers) => {
    const here = frameName(node.callFrame);
    if (node.selfSize > 0) {
      const key = [here, ...callers.slice(-2).reverse()].join(' <- ');
      sites.set(key, (sites.get(key) ?? 0) + node.selfSize);
    }
    const next = [...callers, here].slice(-2);
    for (const child of node.children) walk(child, next);
  };
  walk(head, []);
  return [...sites].sort((a, b) => b[1] - a[1]);
}

/**
 * Samples the process at `port` for `seconds`; answers the sampling profile.
 * @param {{ port: number, seconds: number, interval?: number, all?: boolean }} o
 */
export async function samplePromoted(o) {
  const targets = /** @type {{ webSocketDebuggerUrl: string }[]} */ (await (await fetch(`http://127.0.0.1:${o.port}/json/list`)).json());
  const url = targets[0]?.webSocketDebuggerUrl;
  if (!url) throw new Error(`no inspector target at 127.0.0.1:${o.port}`);
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let nextId = 0;
  /** @type {Map<number, (m: any) => void>} */
  const waiting = new Map();
  ws.on('message', (/** @type {Buffer} */ data) => {
    const m = JSON.parse(data.toString());
    waiting.get(m.id)?.(m);
    waiting.delete(m.id);
  });
  const call = (/** @type {string} */ method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result)));
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('HeapProfiler.enable');
    await call('HeapProfiler.startSampling', { samplingInterval: o.interval ?? 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: o.all === true });
    await new Promise((r) => setTimeout(r, o.seconds * 1000));
    const { profile } = /** @type {{ profile: { head: ProfileNode } }} */ (await call('HeapProfiler.stopSampling'));
    return profile;
  } finally {
    ws.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { options } = parseArgs(process.argv.slice(2));
  if (options.help || !options.port) {
    (options.help ? console.log : console.error)(USAGE);
    process.exit(options.help ? 0 : 2);
  }
  const seconds = Number(options.seconds ?? 12);
  const profile = await samplePromoted({ port: Number(options.port), seconds, interval: options.interval ? Number(options.interval) : undefined, all: options.all === true });
  if (typeof options.out === 'string') writeFileSync(options.out, JSON.stringify(profile));
  const sites = bySite(profile.head);
  const total = sites.reduce((sum, [, bytes]) => sum + bytes, 0);
  console.log(`${options.all ? 'allocated' : 'not collected by a scavenge'}: ${(total / seconds / 1e6).toFixed(2)} MB/s over ${seconds} s (sampled)`);
  console.log('MB/s    share  site <- caller <- its caller');
  for (const [site, bytes] of sites.slice(0, Number(options.top ?? 30))) {
    console.log(`${(bytes / seconds / 1e6).toFixed(3).padStart(6)}  ${((bytes / total) * 100).toFixed(1).padStart(5)}%  ${site}`);
  }
}
