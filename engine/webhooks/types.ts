// The shapes the delivery paths share: which event a delivery carries, and how a live-session sender reports what it
// could not deliver to the delivery log its owner reads.
import type { DeveloperWebhookType } from '../db/webhooks.js';
import type { AttemptResult } from './attempt.js';

/** The event a delivery carries, named as the developer webhook type it goes out under. */
export type WebhookEventType = DeveloperWebhookType;

/** One endpoint a live session sends to: whose it is (whose secret signs), and where. */
export interface LiveEndpoint {
  readonly ownerKind: 'user' | 'app';
  readonly ownerId: string;
  readonly url: string;
}

/**
 * What the live senders (realtime transcript, audio bytes) tell the delivery log: only what went wrong, since a live
 * session sends many requests a minute and a row per success would cost the store more than the delivery.
 */
export interface LiveDeliveryReport {
  readonly webhookId: string;
  readonly uid: string;
  readonly eventType: 'realtime_transcript' | 'audio_bytes';
  readonly endpoint: LiveEndpoint;
  /** Attempts made before giving up. */
  readonly attempts: number;
  readonly last: AttemptResult;
  /** The session the batch came from. */
  readonly sessionId: string;
  /** Bytes of the request body given up on (content is never kept). */
  readonly bodyBytes: number;
}

export interface LiveDeliveryLog {
  /** Records a batch given up on (dropped); never throws, never blocks the session. */
  dropped(report: LiveDeliveryReport): void;
}

/** One segment as the live transcript webhooks carry it (the live transcript segment fields). */
export interface LiveSegment {
  text: string;
  speaker: string;
  speakerId: number;
  is_user: boolean;
  start: number;
  end: number;
}
