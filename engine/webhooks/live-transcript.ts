// Realtime transcript deliveries of one session to one endpoint: the segments each transcript step sends the device,
// batched so that at most one request is on the wire per endpoint and what arrives meanwhile goes in the next one.
// A stale transcript is worth little: a failed batch is tried a few times within a minute, then dropped and reported.
import type { TranscriptSegment } from '../audio/segment.js';
import type { AppReplyKind } from '../db/app-replies.js';
import type { AttemptResult } from './attempt.js';
import type { LiveSegment } from './types.js';
import { liveAttempt, newWebhookId, reportDropped, wait, withQuery, type LiveContext, type LiveTarget } from './live-send.js';

/** Attempts per batch: the first, then one after each of these waits (ms). Within LIVE_RETRY_WINDOW_MS in all. */
export const TRANSCRIPT_RETRY_WAITS_MS: readonly number[] = [1_000, 5_000];

/** A batch is not tried again once this long has passed since its first attempt began (a Retry-After past it drops it). */
export const LIVE_RETRY_WINDOW_MS = 60_000;

/** Segments waiting for a busy endpoint, at most; beyond it the oldest are dropped (counted). */
export const MAX_PENDING_SEGMENTS = 500;

/** An endpoint's reply is stored when its JSON is at most this long; a longer one is counted and not kept. */
export const MAX_STORED_REPLY_BYTES = 4096;

/** A reply's `message` longer than this many characters asks for a push, as the compatible system's rule is. */
export const REPLY_MESSAGE_MIN_CHARS = 5;

export function toLiveSegment(s: TranscriptSegment): LiveSegment {
  return { text: s.text, speaker: s.speaker, speakerId: s.speakerId, is_user: s.isUser, start: s.start, end: s.end };
}

export class TranscriptSender {
  readonly #ctx: LiveContext;
  readonly target: LiveTarget;
  #pending: LiveSegment[] = [];
  #busy = false;
  #retired = false;

  constructor(ctx: LiveContext, target: LiveTarget) {
    this.#ctx = ctx;
    this.target = target;
  }

  /** Segments the step sent the device: sent now if the endpoint is idle, else with the next batch. */
  add(segments: readonly LiveSegment[]): void {
    if (this.#retired) return;
    for (const s of segments) this.#pending.push(s);
    const over = this.#pending.length - MAX_PENDING_SEGMENTS;
    if (over > 0) {
      this.#pending.splice(0, over);
      this.#ctx.metrics.segmentsDropped.inc(over);
    }
    if (!this.#busy) void this.#run();
  }

  /** The endpoint left the user's settings: nothing more is sent (a request on the wire finishes). */
  retire(): void {
    this.#retired = true;
    this.#pending = [];
  }

  async #run(): Promise<void> {
    this.#busy = true;
    try {
      while (this.#pending.length > 0 && !this.#retired) {
        const batch = this.#pending;
        this.#pending = [];
        await this.#deliver(batch);
      }
    } catch (err) {
      this.#ctx.logger.error({ sessionId: this.target.sessionId, err: { name: (err as Error)?.name } }, 'live transcript delivery failed');
    } finally {
      this.#busy = false;
    }
  }

  async #deliver(batch: LiveSegment[]): Promise<void> {
    const ctx = this.#ctx;
    const { endpoint, uid, sessionId } = this.target;
    const user = endpoint.ownerKind === 'user';
    // The user's own URL gets the bare array the compatible system sends it; an app gets the object its apps read.
    const body = JSON.stringify(user ? batch : { session_id: sessionId, segments: batch });
    const url = withQuery(endpoint.url, { session_id: sessionId, uid });
    const webhookId = newWebhookId();
    const began = ctx.clock.now();
    let last: AttemptResult | undefined;
    for (let attempt = 1; ; attempt++) {
      last = await liveAttempt(ctx, 'realtime_transcript', url, webhookId, body, this.target.secrets);
      if (last.outcome === 'delivered') {
        if (last.reply.length > 0) await this.#reply(last.reply, batch);
        return;
      }
      const waitMs = Math.max(TRANSCRIPT_RETRY_WAITS_MS[attempt - 1] ?? Infinity, last.retryAfterMs ?? 0);
      if (last.outcome !== 'retry' || this.#retired || ctx.closing || ctx.clock.now() - began + waitMs > LIVE_RETRY_WINDOW_MS) {
        reportDropped(ctx, 'realtime_transcript', this.target, webhookId, attempt, last, Buffer.byteLength(body));
        return;
      }
      await wait(ctx.scheduler, waitMs);
    }
  }

  /** A 2xx answer: a message to push or a proactive notification request is stored and handed on; anything else is ignored. */
  async #reply(raw: Buffer, batch: readonly LiveSegment[]): Promise<void> {
    const ctx = this.#ctx;
    const kind = replyKind(raw);
    if (kind === undefined) return;
    if (raw.length > MAX_STORED_REPLY_BYTES) {
      ctx.metrics.replies.inc({ kind: 'too_large' });
      return;
    }
    const { endpoint, uid, sessionId } = this.target;
    try {
      const stored = await ctx.replies.add({ appId: endpoint.ownerKind === 'app' ? endpoint.ownerId : null, uid, sessionId, kind }, raw.toString('utf8'), ctx.clock.now());
      ctx.metrics.replies.inc({ kind });
      ctx.onAppReply?.(stored, batch);
    } catch (err) {
      ctx.logger.warn({ sessionId, ownerKind: endpoint.ownerKind, ownerId: endpoint.ownerId, err: { name: (err as Error)?.name } }, 'live transcript reply not stored');
    }
  }
}

/**
 * What a reply asks for: `{"session_id", "notification": {"prompt", "params"}}` a proactive notification,
 * `{"message": "…"}` of more than REPLY_MESSAGE_MIN_CHARS characters a push; anything else nothing.
 */
export function replyKind(raw: Buffer): AppReplyKind | undefined {
  let v: unknown;
  try {
    v = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const o = v as { message?: unknown; notification?: unknown };
  const n = o.notification as { prompt?: unknown } | null | undefined;
  if (typeof n === 'object' && n !== null && typeof n.prompt === 'string' && n.prompt.trim() !== '') return 'notification';
  if (typeof o.message === 'string' && o.message.trim().length > REPLY_MESSAGE_MIN_CHARS) return 'message';
  return undefined;
}
