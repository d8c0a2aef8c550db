// One delivery attempt: sign, send through the destination guard, and say what the answer means for the delivery
// (done, try again, the endpoint is gone, or give up). Shared by the durable queue and the live-session senders.
import { DestinationRefused, type DestinationGuard } from './destination.js';
import { DeliveryClient } from './client.js';
import { signature } from './signing.js';

/** Whole request, connect to last byte, as the issue of a slow receiver is settled by: 15 s. */
export const ATTEMPT_TIMEOUT_MS = 15_000;

/** Bytes of a receiver's answer read (an app's reply is small JSON); the rest is dropped unread. */
export const MAX_REPLY_BYTES = 16_384;

/** The longest Retry-After honoured; a longer one is cut to this. */
export const MAX_RETRY_AFTER_MS = 10 * 3600 * 1000;

/**
 * - `delivered`: 2xx.
 * - `retry`: worth another attempt: no connection, a reset or timeout, 5xx, 408 or 429, a name that did not resolve.
 * - `gone`: 410, the receiver asks for the endpoint to be disabled.
 * - `rejected`: any other answer (3xx, which is never followed, and 4xx): sending it again would not change it.
 * - `refused`: the destination breaks a rule (loopback, private, metadata…) at send time.
 */
export type AttemptOutcome = 'delivered' | 'retry' | 'gone' | 'rejected' | 'refused';

export interface AttemptRequest {
  readonly url: string | URL;
  readonly webhookId: string;
  /** Send time, whole seconds since the epoch (the signature covers it). */
  readonly timestampS: number;
  readonly body: string | Buffer;
  /** @defaultValue application/json */
  readonly contentType?: string;
  /** The owner's valid secrets, newest first. */
  readonly secrets: readonly string[];
  /** @defaultValue ATTEMPT_TIMEOUT_MS */
  readonly timeoutMs?: number;
}

export interface AttemptResult {
  readonly outcome: AttemptOutcome;
  /** The answer's status; null when there was none. */
  readonly status: number | null;
  readonly latencyMs: number;
  /** What went wrong without an answer, as a static code: `timeout`, `connection`, `refused:<rule>`. Never content. */
  readonly error: string | null;
  /** The receiver's Retry-After on a 429 or 503, in milliseconds (at most MAX_RETRY_AFTER_MS). */
  readonly retryAfterMs: number | null;
  /** At most MAX_REPLY_BYTES of a 2xx answer's body (an app's reply); empty otherwise. */
  readonly reply: Buffer;
}

/**
 * Keep-alive connections for outbound deliveries: a receiver taking thousands of deliveries a second is not handed a
 * new connection for each. Every connection a burst opened is kept while idle (up to 30 s): closing most of them
 * after each burst of a group's attempts, only to open them again for the next, cost more than the sending.
 */
export function deliveryClient(guard: DestinationGuard, connectionsPerOrigin = 64): DeliveryClient {
  return new DeliveryClient(guard, { connections: connectionsPerOrigin, keepAliveMs: 30_000 });
}

/** Parses Retry-After (seconds or an HTTP date) into milliseconds from `now`; null when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return null;
  let ms: number;
  if (/^\d+$/.test(v.trim())) ms = Number(v.trim()) * 1000;
  else {
    const at = Date.parse(v);
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS);
}

export function classifyStatus(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 410) return 'gone';
  if (status === 408 || status === 429 || status >= 500) return 'retry';
  return 'rejected';
}

const USER_AGENT = 'wearables-backend-webhooks/1';

/**
 * Sends one attempt. Never throws: every failure is an outcome. `now` reads the injected clock (latency, Retry-After
 * dates); the signature's timestamp is the caller's. `client` keeps connections across attempts (and connects
 * through its own guard); without one, the attempt has a connection of its own.
 */
export async function attemptDelivery(guard: DestinationGuard, req: AttemptRequest, o: { now: () => number; client?: DeliveryClient }): Promise<AttemptResult> {
  const started = o.now();
  const timestamp = String(req.timestampS);
  // Names and values alternating: undici takes them as they are (content-length is its own, from the body).
  const headers = [
    'content-type', req.contentType ?? 'application/json',
    'user-agent', USER_AGENT,
    'webhook-id', req.webhookId,
    'webhook-timestamp', timestamp,
    'webhook-signature', signature(req.webhookId, timestamp, req.body, req.secrets),
  ];
  const client = o.client ?? new DeliveryClient(guard, { connections: 1 });
  try {
    const res = await client.send(req.url, { method: 'POST', headers, body: req.body, timeoutMs: req.timeoutMs ?? ATTEMPT_TIMEOUT_MS, maxResponseBytes: MAX_REPLY_BYTES });
    const outcome = classifyStatus(res.status);
    const after = res.status === 429 || res.status === 503 ? retryAfterMs(res.retryAfter, o.now()) : null;
    return { outcome, status: res.status, latencyMs: o.now() - started, error: null, retryAfterMs: after, reply: outcome === 'delivered' ? res.body : NO_REPLY };
  } catch (err) {
    const latencyMs = o.now() - started;
    if (err instanceof DestinationRefused) {
      // A name that does not resolve now may resolve later; every other rule holds until the URL changes.
      return { outcome: err.rule === 'unresolvable' ? 'retry' : 'refused', status: null, latencyMs, error: `refused:${err.rule}`, retryAfterMs: null, reply: NO_REPLY };
    }
    const code = (err as Error)?.name === 'TimeoutError' ? 'timeout' : 'connection';
    return { outcome: 'retry', status: null, latencyMs, error: code, retryAfterMs: null, reply: NO_REPLY };
  } finally {
    if (!o.client) void client.close();
  }
}

const NO_REPLY = Buffer.alloc(0);
