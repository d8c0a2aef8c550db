#!/usr/bin/env node
// Scans every log file in a directory (as written by tests run with LOG_SCAN_DIR=<dir>) for secrets and user
// content, with the rules of test/helpers/log-scan.ts, plus the phrases the test fixtures speak or store.
// Usage: node scripts/scan-logs.mjs <dir>   (after a build: it uses dist/). Exit status 1 when anything is found.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { scanLines, describeHits } = await import(path.join(root, 'dist/test/helpers/log-scan.js'));

const dir = process.argv[2];
if (!dir || !fs.existsSync(dir)) {
  console.error('usage: node scripts/scan-logs.mjs <dir of .log files>');
  process.exit(2);
}

/** Phrases the fixtures speak, send as transcripts or store: string literals handed to the speech and data helpers. */
function fixturePhrases() {
  const phrases = new Set();
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) {
        const src = fs.readFileSync(p, 'utf8');
        const patterns = [
          /\bspeak\([^,()]+,\s*'([^']{8,})'/g,
          /\bvoice\([^()]*?,\s*'([^']{12,})'\)/g,
          /\bPHRASE\w*\s*=\s*'([^']{8,})'/g,
          /\btext:\s*'([^']{16,})'/g,
          /\bcontent:\s*'([^']{16,})'/g,
        ];
        for (const re of patterns) for (const m of src.matchAll(re)) phrases.add(m[1]);
        for (const m of src.matchAll(/SENTENCES\s*=\s*\[([\s\S]*?)\]/g)) for (const s of m[1].matchAll(/'([^']{12,})'/g)) phrases.add(s[1]);
      }
    }
  };
  walk(path.join(root, 'test'));
  return [...phrases];
}

const phrases = fixturePhrases();
let hits = [];
let lines = 0;
const files = fs.readdirSync(dir).filter((f) => f.endsWith('.log')).sort();
for (const f of files) {
  const text = fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter((l) => l !== '');
  lines += text.length;
  hits = hits.concat(scanLines(text, f, { phrases }));
}
console.log(`scanned ${lines} lines in ${files.length} files against ${phrases.length} fixture phrases: ${hits.length} hits`);
if (hits.length > 0) {
  console.log(describeHits(hits));
  process.exit(1);
}
