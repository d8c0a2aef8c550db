// API key format (developer keys and app secrets alike): `svc_dev_`, `svc_mcp_` or `svc_app_`, 22 base62 characters of randomness (131 bits) and a 6-character CRC32 checksum.
// The checksum lets a secret scanner, or this service, reject a mistyped key offline without a store lookup.
import { hash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { KEY_KINDS, type KeyKind } from '../protocol.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_CHARS = 22;
const CHECKSUM_CHARS = 6;
const BODY = new RegExp(`^svc_(${Object.keys(KEY_KINDS).join('|')})_([0-9A-Za-z]{${RANDOM_CHARS}})([0-9A-Za-z]{${CHECKSUM_CHARS}})$`);

function base62(n: bigint, width: number): string {
  let out = '';
  while (n > 0n) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(width, '0');
}

/** Checked on every request: plain number arithmetic (a CRC32 is below 2^32), not BigInt. */
function checksum(prefix: string, random: string): string {
  let n = crc32(prefix + random);
  let out = '';
  while (n > 0) {
    out = ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out.padStart(CHECKSUM_CHARS, '0');
}

export interface NewKey {
  /** The full secret, shown once. */
  key: string;
  hash: string;
  prefix: string;
}

/** SHA-256 hex of the whole key; the only form in which a key is stored. */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** What a key list shows: the family, the first and last four characters. */
export function displayPrefix(key: string): string {
  const kind = key.slice(0, 8);
  const body = key.slice(8);
  return `${kind}${body.slice(0, 4)}...${body.slice(-4)}`;
}

export function generateKey(kind: KeyKind): NewKey {
  const prefix = KEY_KINDS[kind];
  const random = base62(BigInt(`0x${randomBytes(17).toString('hex')}`) % 62n ** BigInt(RANDOM_CHARS), RANDOM_CHARS);
  const key = prefix + random + checksum(prefix, random);
  return { key, hash: hashKey(key), prefix: displayPrefix(key) };
}

/** The key's family when it is well formed and its checksum matches; undefined otherwise. */
export function parseKey(key: string): KeyKind | undefined {
  const m = BODY.exec(key);
  if (!m) return undefined;
  const kind = m[1] as KeyKind;
  return checksum(KEY_KINDS[kind], m[2]!) === m[3] ? kind : undefined;
}
