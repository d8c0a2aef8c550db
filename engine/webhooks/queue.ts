// The producer of durable webhook deliveries (conversation created, day summary): one delivery row per endpoint, and
// the new deliveries in groups on the `webhooks` queue: deliveries enqueued while a group is being added go together
// in the next one, one BullMQ job for the lot. A delivery that waits (a retry, a circuit, a redelivery) has a job of
// its own, the job id being the webhook id. Payloads carry ids only; the body is built by the worker at the first
// attempt.
import { createHash } from 'node:crypto';
import { Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import { bullConnection, bullPrefix, within } from '../jobs/queues.js';
import { SerialLoop } from '../runtime/serial-loop.js';
import { DeliveriesRepository, newWebhookId, OPEN_STATES, type DeliveryRecord, type NewDelivery } from '../db/deliveries.js';
import { WebhooksRepository, type WebhookEndpoint } from '../db/webhooks.js';
import type { WebhookEventType } from './types.js';

export const WEBHOOKS_QUEUE = 'webhooks';
export const DELIVER_JOB = 'deliver';
export const DELIVER_GROUP_JOB = 'deliver-group';

/** The most deliveries one group job carries (more wait for the next). */
export const DELIVERY_GROUP_MAX = 128;

/** The body and query of a delivery's first attempt, sent again as they are by every retry. */
export interface FrozenBody {
  body: string;
  query: Record<string, string>;
}

/** A delivery waiting on its own: a retry, a delivery held by its endpoint's circuit, a redelivery. */
export interface DeliverJobData {
  deliveryId: string;
  /** The delivery's attempt count when this job was queued (a redelivery starts the retry schedule afresh). */
  firstAttempt: number;
  /**
   * The body and query of the first attempt, kept with the job until the delivery ends so that every retry sends the
   * same bytes (the conversation may change meanwhile); absent until then.
   */
  frozen?: FrozenBody;
}

/** New deliveries, first attempts all (attempt count 0 when queued, or the count a redelivery started from). */
export interface DeliverGroupData {
  deliveries: { id: string; firstAttempt: number }[];
  /** Each delivery's frozen body by id, kept before the group's first attempts go (so a re-run sends the same bytes). */
  frozen?: Record<string, FrozenBody>;
}

export type WebhookJobData = DeliverJobData | DeliverGroupData;

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

interface Waiting {
  ids: string[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface EndpointRead {
  uid: string;
  resolve: (endpoints: WebhookEndpoint[]) => void;
  reject: (err: unknown) => void;
}

export class WebhookQueue {
  readonly #connection: RedisClient;
  readonly queue: Queue<WebhookJobData>;
  readonly deliveries: DeliveriesRepository;
  readonly #webhooks: WebhooksRepository;
  /** Deliveries whose group job is not added yet, by caller. */
  #waiting: Waiting[] = [];
  readonly #groups = new SerialLoop({ ready: () => this.#waiting.length > 0, step: () => this.#addGroup() });
  /** Users whose memory_created endpoints were asked for in this turn of the event loop: read together at its end. */
  #endpointReads: EndpointRead[] = [];

  constructor(o: WebhookQueueOptions) {
    this.#connection = bullConnection(o.redisUrl, 'producer');
    this.queue = new Queue<WebhookJobData>(WEBHOOKS_QUEUE, { connection: this.#connection, prefix: bullPrefix(o.redisUrl, o.prefix) });
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
    let endpoints = await this.#memoryCreatedEndpoints(uid);
    if (o.reprocess) endpoints = endpoints.filter((e) => e.ownerKind === 'user');
    else if (o.discarded) endpoints = endpoints.filter((e) => e.ownerKind === 'user');
    return this.#enqueue(uid, 'memory_created', conversationId, endpoints, o.reprocess);
  }

  /**
   * The user's memory_created endpoints, read with those of every conversation completing in the same turn of the
   * event loop (one statement for the lot rather than one each: the per-statement cost is most of a small read's).
   */
  #memoryCreatedEndpoints(uid: string): Promise<WebhookEndpoint[]> {
    return new Promise((resolve, reject) => {
      if (this.#endpointReads.push({ uid, resolve, reject }) === 1) setImmediate(() => void this.#readEndpoints());
    });
  }

  async #readEndpoints(): Promise<void> {
    const reads = this.#endpointReads;
    this.#endpointReads = [];
    try {
      const found = await this.#webhooks.endpointsForUsers(reads.map((r) => r.uid), 'memory_created');
      // Each caller gets a list of its own (a caller may filter it).
      for (const r of reads) r.resolve([...(found.get(r.uid) ?? [])]);
    } catch (err) {
      for (const r of reads) r.reject(err);
    }
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
    if (rows.length === 0) return rows;
    await this.deliveries.insert(rows);
    // Every row goes into a group, new or found: a crash between the two writes must not leave a delivery without a
    // job. A group finds a delivery that already ended, or was attempted since, so and leaves it alone.
    await new Promise<void>((resolve, reject) => {
      this.#waiting.push({ ids: rows.map((r) => r.id), resolve, reject });
      this.#groups.kick();
    });
    return rows;
  }

  /** One group job for the callers waiting (whole callers, up to DELIVERY_GROUP_MAX deliveries unless one has more). */
  async #addGroup(): Promise<void> {
    let n = 0;
    let take = 0;
    while (take < this.#waiting.length && (take === 0 || n + this.#waiting[take]!.ids.length <= DELIVERY_GROUP_MAX)) n += this.#waiting[take++]!.ids.length;
    const callers = this.#waiting.splice(0, take);
    const data: DeliverGroupData = { deliveries: callers.flatMap((c) => c.ids.map((id) => ({ id, firstAttempt: 0 }))) };
    try {
      await this.queue.add(DELIVER_GROUP_JOB, data, DELIVER_JOB_OPTIONS);
      for (const c of callers) c.resolve();
    } catch (err) {
      for (const c of callers) c.reject(err);
    }
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
    await within(this.#groups.idle(), 1000);
    await within(this.queue.close(), 1000);
    await within(this.#connection.quit(), 500);
    this.#connection.disconnect();
  }
}
