// What the live senders (realtime transcript, audio bytes) share: the node's delivery context, one metered attempt,
// and how a batch given up on is counted and reported.
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import type { LiveWebhookMetrics } from '../node/metrics.js';
import type { WebhookEndpoint } from '../db/webhooks.js';
import type { AppRepliesRepository, AppReply } from '../db/app-replies.js';
import { attemptDelivery, type AttemptResult } from './attempt.js';
import type { DeliveryClient } from './client.js';
import type { DestinationGuard } from './destination.js';
import type { LiveDeliveryLog } from './types.js';
import type { LiveSegment } from './types.js';

export type LiveEvent = 'realtime_transcript' | 'audio_bytes';

/** Handed every stored reply of a live transcript endpoint with the segments it answered (the notifications act on them). */
export type AppReplyHandler = (reply: AppReply, segments: readonly LiveSegment[]) => void;

/** The node's parts every live sender uses. */
export interface LiveContext {
  readonly guard: DestinationGuard;
  readonly clock: Clock;
  readonly scheduler: Scheduler;
  readonly logger: Logger;
  readonly metrics: LiveWebhookMetrics;
  readonly client: DeliveryClient;
  readonly replies: AppRepliesRepository;
  readonly log?: LiveDeliveryLog | undefined;
  readonly onAppReply?: AppReplyHandler | undefined;
  /** Requests on the wire, for a stopping node to wait on. */
  readonly inFlight: Set<Promise<unknown>>;
  /** Set while the node stops: no retry waits any more. */
  closing: boolean;
}

/** One endpoint of one session: where, whose secrets sign (refreshed with the session's settings), for whom. */
export interface LiveTarget {
  readonly endpoint: WebhookEndpoint;
  secrets: readonly string[];
  readonly uid: string;
  readonly sessionId: string;
}

/** A fresh Standard Webhooks message id: one per batch or window, the same on its retries. */
export { newWebhookId } from '../db/deliveries.js';

/** The endpoint's URL with the event's query parameters set (its own other parameters kept). */
export function withQuery(url: string, query: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
  return u.toString();
}

/** One signed attempt, counted by event and outcome, on the wire for the in-flight gauge. */
export async function liveAttempt(ctx: LiveContext, event: LiveEvent, url: string, webhookId: string, body: string | Buffer, secrets: readonly string[], contentType?: string): Promise<AttemptResult> {
  ctx.metrics.inFlight.inc({ event });
  const p = attemptDelivery(ctx.guard, { url, webhookId, timestampS: Math.floor(ctx.clock.now() / 1000), body, secrets, ...(contentType ? { contentType } : {}) }, { now: () => ctx.clock.now(), client: ctx.client });
  ctx.inFlight.add(p);
  try {
    const r = await p;
    ctx.metrics.requests.inc({ event, outcome: r.outcome });
    return r;
  } finally {
    ctx.inFlight.delete(p);
    ctx.metrics.inFlight.dec({ event });
  }
}

/** A batch or window given up on: counted, logged with ids only, and told to the delivery log. */
export function reportDropped(ctx: LiveContext, event: LiveEvent, target: LiveTarget, webhookId: string, attempts: number, last: AttemptResult, bodyBytes: number): void {
  const reason = last.outcome === 'retry' ? 'retries_spent' : last.outcome;
  ctx.metrics.dropped.inc({ event, reason });
  const { ownerKind, ownerId } = target.endpoint;
  ctx.logger.debug({ sessionId: target.sessionId, event, webhookId, ownerKind, ownerId, attempts, status: last.status, error: last.error, reason }, 'live webhook delivery given up');
  try {
    ctx.log?.dropped({ webhookId, uid: target.uid, eventType: event, endpoint: { ownerKind, ownerId, url: target.endpoint.url }, attempts, last, sessionId: target.sessionId, bodyBytes });
  } catch {
    // The log never blocks or breaks a session; its own failures are its to count.
  }
}

/** Resolves after `ms` of the injected clock. */
export function wait(scheduler: Scheduler, ms: number): Promise<void> {
  return new Promise((resolve) => scheduler.after(ms, resolve));
}
