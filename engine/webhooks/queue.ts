// The producer of durable webhook deliveries (conversation created, day summary): one delivery row per endpoint and
// one BullMQ job per delivery on the `webhooks` queue, the job id being the webhook id. Payloads carry ids only; the
// body is built by the worker at the first attempt.
import { createHash } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import { bullConnection, within } from '../jobs/queues.js';
import { DeliveriesRepository, newWebhookId, OPEN_STATES, type DeliveryRecord, type NewDelivery } from '../db/deliveries.js';
import { WebhooksRepository, type WebhookEndpoint } from '../db/webhooks.js';
import type { WebhookEventType } from './types.js';

export const WEBHOOKS_QUEUE = 'webhooks';
export const DELIVER_JOB = 'deliver';

export interface DeliverJobData {
  deliveryId: string;
  /** The delivery's attempt count when this job was queued (a redelivery starts the retry schedule afresh). */
  firstAttempt: number;
  /**
   * The body and query of the first attempt, kept with the job until the delivery ends so that every retry sends the
   * same bytes (the conversation may change meanwhile); absent until then.
   */
  frozen?: { body: string; query: Record<string, string> };
}

/**
 * Jobs are removed when done (the delivery row is the record). `attempts` covers the worker's own failures (the
 * store unreachable): the delivery's retries are scheduled by the worker itself, not counted here.
 */
export const DELIVER_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 10_000 },
  removeOnComplete: true,
  removeOnFail: true,
} as const;

/** Why a redelivery was not started. */
export type RedeliverRefusal = 'not_found' | 'in_flight' | 'live';

/**
 * The webhook id of an event that must reach an endpoint once (a first completion, a day's summary): derived from
 * what it is about, so that announcing it again (after a crash) finds the same delivery instead of making another.
 */
export function onceId(eventType: WebhookEventType, ownerKind: string, ownerId: string, subjectId: string): string {
  return 'msg_' + createHash('sha256').update(`${eventType}\n${ownerKind}\n${ownerId}\n${subjectId}`).digest('hex').slice(0, 32);
}

export interface WebhookQueueOptions {
  redisUrl: string;
  /** BullMQ key prefix (REDIS_PREFIX). */
  prefix: string;
  knex: Knex;
  now: () => number;
  logger: Logger;
}

export class WebhookQueue {
  readonly #connection: Redis;
  readonly queue: Queue<DeliverJobData>;
  readonly deliveries: DeliveriesRepository;
  readonly #webhooks: WebhooksRepository;

  constructor(o: WebhookQueueOptions) {
    this.#connection = bullConnection(o.redisUrl, 'producer');
    this.queue = new Queue<DeliverJobData>(WEBHOOKS_QUEUE, { connection: this.#connection, prefix: o.prefix });
    this.queue.on('error', () => undefined);
    this.deliveries = new DeliveriesRepository(o.knex, o.now, o.logger);
    this.#webhooks = new WebhooksRepository(o.knex);
  }

  /**
   * A conversation completed: one delivery to the user's `memory_created` URL and one to each installed app with
   * `memory_creation`. A first completion has fixed webhook ids (announcing it twice delivers once); a reprocess goes
   * to the user's URL only, under a new id, its body saying `"reprocess": true`; apps skip discarded conversations,
   * as in the compatible system. Answers the deliveries (new or found).
   */
  async enqueueConversationCreated(uid: string, conversationId: string, o: { reprocess: boolean; discarded: boolean }): Promise<NewDelivery[]> {
    let endpoints = await this.#webhooks.endpointsFor(uid, 'memory_created');
    if (o.reprocess) endpoints = endpoints.filter((e) => e.ownerKind === 'user');
    else if (o.discarded) endpoints = endpoints.filter((e) => e.ownerKind === 'user');
    return this.#enqueue(uid, 'memory_created', conversationId, endpoints, o.reprocess);
  }

  /** A user's summary of `date` (YYYY-MM-DD) to their `day_summary` URL, once per date; its body is built at send time by the registered builder. */
  async enqueueDaySummary(uid: string, date: string): Promise<NewDelivery[]> {
    return this.#enqueue(uid, 'day_summary', date, await this.#webhooks.endpointsFor(uid, 'day_summary'), false);
  }

  async #enqueue(uid: string, eventType: WebhookEventType, subjectId: string, endpoints: readonly WebhookEndpoint[], fresh: boolean): Promise<NewDelivery[]> {
    const rows: NewDelivery[] = endpoints.map((e) => ({
      id: fresh ? newWebhookId() : onceId(eventType, e.ownerKind, e.ownerId, subjectId),
      ownerKind: e.ownerKind,
      ownerId: e.ownerId,
      uid,
      eventType,
      subjectId,
      reprocess: fresh,
    }));
    await this.deliveries.insert(rows);
    // Every row gets its job, new or found: a crash between the two writes must not leave a delivery without one. A
    // job still queued under the id is kept by BullMQ; one whose delivery already ended finds it so and does nothing.
    await this.queue.addBulk(rows.map((r) => ({ name: DELIVER_JOB, data: { deliveryId: r.id, firstAttempt: 0 }, opts: { ...DELIVER_JOB_OPTIONS, jobId: r.id } })));
    return rows;
  }

  /**
   * Sends an ended delivery again under its webhook id, with a body built anew and a fresh retry schedule. Refused
   * while it is under way, and for live deliveries (their batches are gone).
   */
  async redeliver(d: DeliveryRecord): Promise<RedeliverRefusal | undefined> {
    if (d.eventType === 'realtime_transcript' || d.eventType === 'audio_bytes') return 'live';
    if (!(await this.deliveries.transition(d.id, ['delivered', 'failed', 'cancelled'], 'pending'))) {
      const now = await this.deliveries.get(d.id);
      return now && OPEN_STATES.includes(now.state) ? 'in_flight' : 'not_found';
    }
    await (await this.queue.getJob(d.id))?.remove().catch(() => undefined);
    await this.queue.add(DELIVER_JOB, { deliveryId: d.id, firstAttempt: d.attempts }, { ...DELIVER_JOB_OPTIONS, jobId: d.id });
    return undefined;
  }

  async close(): Promise<void> {
    await within(this.queue.close(), 1000);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}
