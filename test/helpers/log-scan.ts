// Rules that find secrets and user content in captured log lines: developer, assistant and app keys, webhook secrets,
// ID tokens, Authorization values, known transcript phrases, base64 runs long enough to be audio and raw PCM arrays.
// Shared by the in-test scans and scripts/scan-logs.mjs, which scans a directory of logs written under LOG_SCAN_DIR.
import { parseKey } from '../../engine/identity/key-format.js';

export interface ScanHit {
  rule: string;
  /** 1-based line number within its source. */
  line: number;
  source: string;
  /** The line with what matched masked. */
  masked: string;
}

export interface ScanExtras {
  /** Exact strings that must never be logged (the secrets a test created). */
  secrets?: readonly string[];
  /** Phrases of user content (transcripts, memories) that must never be logged; matched case-insensitively. */
  phrases?: readonly string[];
}

interface Rule {
  name: string;
  re: RegExp;
  /** A further check of a match, for shapes that also match harmless text. */
  confirm?: (m: string) => boolean;
}

const RULES: readonly Rule[] = [
  // Keys carry a checksum: only well-formed ones count, so a prefix such as `svc_dev_abcd...wxyz` does not.
  { name: 'api key', re: /svc_(?:dev|mcp|app)_[0-9A-Za-z]{28}(?![0-9A-Za-z])/g, confirm: (m) => parseKey(m) !== undefined },
  { name: 'webhook secret', re: /whsec_[A-Za-z0-9+/]{16,}={0,2}/g },
  { name: 'id token', re: /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g },
  // An Authorization value that was not censored: any bearer or basic credential.
  // (a digit required, so prose such as "basic information" is not one).
  { name: 'authorization value', re: /\b(?:bearer|basic)\s+(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{12,}/gi },
  { name: 'authorization field', re: /"authorization"\s*:\s*"(?!\[redacted\])[^"]+"/gi },
  // Audio as base64: a long unbroken run (stack traces and ids are far shorter).
  { name: 'base64 run', re: /[A-Za-z0-9+/]{200,}={0,2}/g },
  // A Buffer or typed array serialised as JSON: a long list of small integers, or an object of numeric keys.
  { name: 'raw sample array', re: /\[(?:\s*-?\d{1,6}\s*,){63,}\s*-?\d{1,6}\s*\]/g },
  { name: 'raw sample object', re: /\{(?:\s*"\d+"\s*:\s*-?\d{1,6}\s*,){63,}/g },
];

const mask = (s: string): string => (s.length <= 8 ? '*'.repeat(s.length) : `${s.slice(0, 4)}…[${s.length - 4} masked]`);

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Every hit in `lines` (one log record each) of `source`; what matched is masked in the hit. */
export function scanLines(lines: readonly string[], source: string, extras: ScanExtras = {}): ScanHit[] {
  const rules: Rule[] = [...RULES];
  for (const secret of extras.secrets ?? []) if (secret.length >= 8) rules.push({ name: 'known secret', re: new RegExp(escapeRe(secret), 'g') });
  for (const phrase of extras.phrases ?? []) if (phrase.trim().length >= 6) rules.push({ name: 'user content', re: new RegExp(escapeRe(phrase.trim()), 'gi') });
  const hits: ScanHit[] = [];
  lines.forEach((line, i) => {
    for (const rule of rules) {
      let masked = line;
      let found = false;
      for (const m of line.matchAll(rule.re)) {
        if (rule.confirm && !rule.confirm(m[0])) continue;
        found = true;
        masked = masked.split(m[0]).join(mask(m[0]));
      }
      if (found) hits.push({ rule: rule.name, line: i + 1, source, masked: masked.length > 600 ? `${masked.slice(0, 600)}…` : masked });
    }
  });
  return hits;
}

/** One line per hit, for a failure message. */
export const describeHits = (hits: readonly ScanHit[]): string => hits.map((h) => `${h.source}:${h.line} [${h.rule}] ${h.masked}`).join('\n');
