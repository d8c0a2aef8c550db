// Standard Webhooks signing: `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature`, one `v1,<base64
// HMAC-SHA256 of "id.timestamp.body">` per valid secret of the owner, space-separated, newest first. Signed with
// node:crypto over the exact bytes sent: the `standardwebhooks` package (used by the tests to verify) signs only
// text, re-encoded as UTF-8, which would break binary audio bodies, and costs several times more CPU per delivery
// (docs/architecture.md).
import { createHmac } from 'node:crypto';

const PREFIX = 'whsec_';

/** Decoded keys by secret: decoding is done once per secret rather than per delivery. */
const keys = new Map<string, Buffer>();
const KEY_CACHE_MAX = 4096;

function keyOf(secret: string): Buffer {
  let k = keys.get(secret);
  if (!k) {
    if (keys.size >= KEY_CACHE_MAX) keys.clear();
    k = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
    keys.set(secret, k);
  }
  return k;
}

/** One `v1,<base64>` signature of `id.timestamp.body` with one secret. */
export function sign(secret: string, webhookId: string, timestampS: number | string, body: string | Buffer): string {
  return 'v1,' + createHmac('sha256', keyOf(secret)).update(`${webhookId}.${timestampS}.`).update(body).digest('base64');
}

/**
 * The `webhook-signature` value: a signature per secret (newest first), space-separated. `secrets` must not be empty
 * (an owner always has one: WebhookSecrets creates it on first use); `timestampS` is the attempt's send time in whole
 * seconds, `body` exactly the bytes sent.
 */
export function signature(webhookId: string, timestampS: number | string, body: string | Buffer, secrets: readonly string[]): string {
  if (secrets.length === 0) throw new Error('a webhook delivery needs at least one signing secret');
  if (secrets.length === 1) return sign(secrets[0]!, webhookId, timestampS, body);
  return secrets.map((s) => sign(s, webhookId, timestampS, body)).join(' ');
}
