// The consumer of the `webhooks` queue on jobs nodes: groups of new deliveries (one read, one build, attempts side by
// side) and deliveries waiting on their own, one attempt each per run, recorded on the delivery row; retries on the
// Standard Webhooks schedule; a per-endpoint circuit; endpoints disabled when gone (410) or failing for too long; apps'
// replies to a created conversation stored on it.
import { DelayedError, Worker, type Job } from 'bullmq';
import type { RedisClient } from '../redis.js';
import client from 'prom-client';
import type { Services } from '../services.js';
import { bullConnection, bullPrefix, closeWorker } from '../jobs/queues.js';
import { OPEN_STATES, type AttemptView, type DeliveriesRepository, type DeliveryRecord, type EndpointKey } from '../db/deliveries.js';
import { attemptDelivery, deliveryClient, ATTEMPT_TIMEOUT_MS, type AttemptResult } from './attempt.js';
import type { DeliveryClient } from './client.js';
import { secretsAt } from './secrets.js';
import { webhookParts, type WebhookParts } from './parts.js';
import { DELIVER_JOB, DELIVER_JOB_OPTIONS, WEBHOOKS_QUEUE, type DeliverJobData, type FrozenBody, type WebhookJobData } from './queue.js';

/** Waits after attempt 1, 2, … fails: the Standard Webhooks schedule (immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h). */
export const RETRY_DELAYS_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000] as const;

/** Each wait is lengthened by up to this fraction, so deliveries failed together by one outage do not return together. */
export const RETRY_JITTER = 0.1;

/** Consecutive failed attempts that open an endpoint's circuit. */
export const CIRCUIT_FAILURES = 5;

/** How long an open circuit holds an endpoint's deliveries back before one probe is let through. */
export const CIRCUIT_OPEN_MS = 60_000;

/** A failure run disables its endpoint once it counts this many failed attempts… */
export const DISABLE_AFTER_FAILURES = 100;

/** …or has lasted this long (5 days), whichever comes first. */
export const DISABLE_AFTER_MS = 5 * 24 * 3600 * 1000;

/** Characters of an app's reply message kept. */
export const MAX_APP_REPLY_CHARS = 4000;

/** Connections a jobs process keeps to one receiver's host. */
export const WEBHOOK_CONCURRENCY = 64;

/** Jobs one jobs process runs at once (a group job attempts its deliveries side by side). */
export const WEBHOOK_JOB_CONCURRENCY = 16;

export interface WebhookWorkerOptions {
  services: Services;
  redisUrl: string;
  prefix: string;
  /** @defaultValue ATTEMPT_TIMEOUT_MS */
  timeoutMs?: number;
  /** BullMQ's check for jobs whose process died, in milliseconds. @defaultValue BullMQ's 30 s */
  stalledIntervalMs?: number;
  random?: () => number;
}

/** What one run did (tests, logs). */
export type RunOutcome = 'skipped' | 'cancelled' | 'delivered' | 'retry' | 'failed' | 'held';

interface Metrics {
  deliveries: client.Counter<'event' | 'outcome'>;
  failed: client.Counter<'event'>;
  latency: client.Histogram<'event'>;
}

function metrics(registry: client.Registry): Metrics {
  return {
    deliveries: new client.Counter({ name: 'webhook_deliveries_total', help: 'Webhook delivery attempts by event type and outcome', labelNames: ['event', 'outcome'] as const, registers: [registry] }),
    failed: new client.Counter({
      name: 'webhook_deliveries_failed_total',
      help: 'Webhook deliveries given up, by event type: retries spent, an answer not worth retrying (gone, rejected, refused), or the endpoint disabled; each stays failed in its owner\'s delivery log.',
      labelNames: ['event'] as const,
      registers: [registry],
    }),
    latency: new client.Histogram({
      name: 'webhook_attempt_seconds',
      help: 'Time from sending a webhook attempt to its answer (or failure), seconds',
      labelNames: ['event'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers: [registry],
    }),
  };
}

/** The wait before the attempt after failed attempt `n` (1-based, within this round); undefined once the schedule is spent. */
export function retryDelayMs(n: number, retryAfterMs: number | null, random: () => number = Math.random): number | undefined {
  const base = RETRY_DELAYS_MS[n - 1];
  if (base === undefined) return undefined;
  return Math.max(Math.round(base * (1 + RETRY_JITTER * random())), retryAfterMs ?? 0);
}

/** What one delivery of a job is to do, once the group's reads are in. */
interface Member {
  id: string;
  firstAttempt: number;
  view: AttemptView;
  key: EndpointKey;
  frozen?: FrozenBody;
}

export class WebhookWorker {
  readonly #connection: RedisClient;
  #closing = false;
  readonly worker: Worker<WebhookJobData, RunOutcome[]>;
  readonly #s: Services;
  readonly #parts: WebhookParts;
  readonly #deliveries: DeliveriesRepository;
  readonly #client: DeliveryClient;
  readonly #metrics: Metrics;
  readonly #timeoutMs: number;
  readonly #random: () => number;
  /** Deliveries this process is attempting now: a delivery queued twice (announced again) is not sent twice at once. */
  readonly #sending = new Set<string>();

  constructor(o: WebhookWorkerOptions) {
    this.#s = o.services;
    this.#parts = webhookParts(o.services);
    this.#deliveries = this.#parts.deliveries;
    this.#client = deliveryClient(this.#parts.guard, WEBHOOK_CONCURRENCY);
    this.#metrics = metrics(o.services.registry);
    this.#timeoutMs = o.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
    this.#random = o.random ?? Math.random;
    this.#connection = bullConnection(o.redisUrl, 'worker', () => this.#closing);
    this.worker = new Worker<WebhookJobData, RunOutcome[]>(WEBHOOKS_QUEUE, (job, token) => this.run(job, token), {
      connection: this.#connection,
      prefix: bullPrefix(o.redisUrl, o.prefix),
      concurrency: WEBHOOK_JOB_CONCURRENCY,
      // A delivery interrupted by its process dying is sent again (same webhook id): at least once.
      maxStalledCount: 10,
      ...(o.stalledIntervalMs ? { stalledInterval: o.stalledIntervalMs, lockDuration: o.stalledIntervalMs } : {}),
    });
    this.worker.on('error', () => undefined);
  }

  /**
   * One run of a job: at most one attempt of each of its deliveries. A group's deliveries are read in one statement,
   * their bodies built together, and attempted side by side; each is then recorded (the store groups those writes).
   * A group leaves alone a delivery that ended or was attempted since it was queued (its own job has it then).
   */
  async run(job: Job<WebhookJobData>, token?: string): Promise<RunOutcome[]> {
    const data = job.data;
    const group = 'deliveries' in data;
    const queued = group ? data.deliveries : [{ id: data.deliveryId, firstAttempt: data.firstAttempt }];
    const frozen: Record<string, FrozenBody> = group ? { ...data.frozen } : data.frozen ? { [data.deliveryId]: data.frozen } : {};
    const mine = queued.filter((q) => !this.#sending.has(q.id));
    for (const q of mine) this.#sending.add(q.id);
    try {
      const views = await this.#deliveries.attemptViews(mine.map((q) => q.id));
      const outcomes: RunOutcome[] = queued.map(() => 'skipped');
      const members: Member[] = [];
      const at = new Map<string, number>(queued.map((q, i) => [q.id, i]));
      const now = this.#s.clock.now();
      for (const q of mine) {
        const view = views.get(q.id);
        if (!view || !OPEN_STATES.includes(view.delivery.state) || (group && view.delivery.attempts !== q.firstAttempt)) continue;
        const d = view.delivery;
        const key: EndpointKey = { ownerKind: d.ownerKind, ownerId: d.ownerId, eventType: d.eventType };
        if (view.url === undefined) {
          outcomes[at.get(q.id)!] = await this.#cancel(d);
          continue;
        }
        const held = await this.#circuitWait(key, view.health.circuitOpenUntil, now);
        if (held !== undefined) {
          await this.#deliveries.setNextAttempt(d.id, now + held);
          await this.#later(job, token, { id: q.id, firstAttempt: q.firstAttempt, view, key, ...(frozen[q.id] ? { frozen: frozen[q.id]! } : {}) }, held);
          outcomes[at.get(q.id)!] = 'held';
          continue;
        }
        members.push({ id: q.id, firstAttempt: q.firstAttempt, view, key, ...(frozen[q.id] ? { frozen: frozen[q.id]! } : {}) });
      }
      // Bodies are built once, then kept with the job before any is sent: a run cut short sends the same bytes again.
      const unbuilt = members.filter((m) => !m.frozen);
      if (unbuilt.length > 0) {
        const built = await this.#parts.bodies.buildMany(unbuilt.map((m) => m.view.delivery));
        const kept: Record<string, FrozenBody> = {};
        for (let i = 0; i < unbuilt.length; i++) {
          const m = unbuilt[i]!;
          const b = built[i];
          if (b) kept[m.id] = m.frozen = b;
          else outcomes[at.get(m.id)!] = await this.#cancel(m.view.delivery);
        }
        if (Object.keys(kept).length > 0) {
          await job.updateData(group ? { ...data, frozen: { ...data.frozen, ...kept } } : { ...data, frozen: kept[data.deliveryId]! });
        }
      }
      await Promise.all(members.filter((m) => m.frozen).map(async (m) => (outcomes[at.get(m.id)!] = await this.#attempt(job, token, m))));
      // A job of its own that waits again was moved to the delayed set: BullMQ must not finish it.
      if (!group && (outcomes[0] === 'retry' || outcomes[0] === 'held')) throw new DelayedError();
      return outcomes;
    } finally {
      for (const q of mine) this.#sending.delete(q.id);
    }
  }

  /** One attempt of a delivery whose body is frozen, recorded; a retry is scheduled on a job of its own. */
  async #attempt(job: Job<WebhookJobData>, token: string | undefined, m: Member): Promise<RunOutcome> {
    const { logger, clock } = this.#s;
    const { view, key } = m;
    const d = view.delivery;
    const frozen = m.frozen!;
    const target = new URL(view.url!);
    for (const [k, v] of Object.entries(frozen.query)) target.searchParams.set(k, v);
    let now = clock.now();
    const secrets = view.secret ? secretsAt(view.secret, now) : await this.#parts.secrets.signingSecrets(d.ownerKind, d.ownerId, now);
    now = clock.now();
    const r = await attemptDelivery(
      this.#parts.guard,
      { url: target, webhookId: d.id, timestampS: Math.floor(now / 1000), body: frozen.body, secrets, timeoutMs: this.#timeoutMs },
      { now: () => clock.now(), client: this.#client },
    );
    this.#metrics.deliveries.inc({ event: d.eventType, outcome: r.outcome });
    this.#metrics.latency.observe({ event: d.eventType }, r.latencyMs / 1000);
    const attempts = d.attempts + 1;
    const bodyBytes = Buffer.byteLength(frozen.body);
    const record = { attempts, lastStatus: r.status, lastError: r.error, lastLatencyMs: r.latencyMs, bodyBytes };
    if (r.outcome === 'delivered') {
      // The reply and the endpoint's health first: whoever sees the delivery delivered sees them too.
      // An endpoint seen without failures has no run to end (a failure counted since is as if it came after this).
      if (view.health.consecutiveFailures > 0) await this.#deliveries.recordSuccess(key);
      if (d.ownerKind === 'app' && d.eventType === 'memory_created') await this.#storeReply(d, r);
      await this.#deliveries.recordAttempt(d.id, { ...record, state: 'delivered', nextAttemptAt: null });
      return 'delivered';
    }
    const delay = r.outcome === 'retry' ? retryDelayMs(attempts - m.firstAttempt, r.retryAfterMs, this.#random) : undefined;
    const at = clock.now();
    await this.#deliveries.recordAttempt(d.id, { ...record, state: delay === undefined ? 'failed' : 'retrying', nextAttemptAt: delay === undefined ? null : at + delay });
    logger.info({ deliveryId: d.id, eventType: d.eventType, ownerKind: d.ownerKind, outcome: r.outcome, status: r.status, error: r.error, attempts }, 'webhook attempt failed');
    if (r.outcome === 'gone') await this.#disable(d, key, 'gone', at);
    else {
      const h = await this.#deliveries.recordFailure(key, at, CIRCUIT_FAILURES, at + CIRCUIT_OPEN_MS);
      const runMs = h.firstFailureAt === null ? 0 : at - Date.parse(h.firstFailureAt);
      if (h.consecutiveFailures >= DISABLE_AFTER_FAILURES || runMs >= DISABLE_AFTER_MS) {
        await this.#disable(d, key, 'failing', at);
        this.#metrics.failed.inc({ event: d.eventType });
        return 'failed';
      }
    }
    if (delay === undefined) {
      this.#metrics.failed.inc({ event: d.eventType });
      return 'failed';
    }
    await this.#later(job, token, m, delay);
    return 'retry';
  }

  /**
   * Undefined when an attempt may go now: the endpoint's circuit is closed, or it half-opens and this run won the one
   * probe. Else how long to wait (to the circuit's end, or one open period while a probe is out), with jitter.
   */
  async #circuitWait(key: EndpointKey, openUntil: string | null, now: number): Promise<number | undefined> {
    if (openUntil === null) return undefined;
    const until = Date.parse(openUntil);
    if (until <= now && (await this.#deliveries.claimProbe(key, openUntil, now + CIRCUIT_OPEN_MS))) return undefined;
    const wait = until > now ? until - now : CIRCUIT_OPEN_MS;
    return Math.round(wait * (1 + RETRY_JITTER * this.#random()));
  }

  /**
   * Puts the delivery back to run after `delayMs` (BullMQ's delay runs on real time; the row holds the clock's due
   * time): a job of its own moves to the delayed set (the run then ends with DelayedError); a member of a group gets
   * a delayed job of its own under its webhook id, carrying its frozen body.
   */
  async #later(job: Job<WebhookJobData>, token: string | undefined, m: Member, delayMs: number): Promise<void> {
    if ('deliveries' in job.data) {
      const data: DeliverJobData = { deliveryId: m.id, firstAttempt: m.firstAttempt, ...(m.frozen ? { frozen: m.frozen } : {}) };
      await this.#s.webhookQueue.queue.add(DELIVER_JOB, data, { ...DELIVER_JOB_OPTIONS, jobId: m.id, delay: delayMs });
    } else await job.moveToDelayed(Date.now() + delayMs, token);
  }

  async #cancel(d: DeliveryRecord): Promise<RunOutcome> {
    await this.#deliveries.transition(d.id, OPEN_STATES, 'cancelled');
    return 'cancelled';
  }

  /** Disables the endpoint, cancels what it still had under way, and, when this run switched it off, tells its owner. */
  async #disable(d: DeliveryRecord, key: EndpointKey, reason: 'gone' | 'failing', now: number): Promise<void> {
    const { webhooks, apps } = this.#parts;
    const switched = d.ownerKind === 'user' ? await webhooks.disable(d.ownerId, d.eventType, now) : await apps.disableWebhook(d.ownerId, now);
    await this.#deliveries.markDisabled(key, reason, now);
    await this.#deliveries.cancelOpen(key);
    if (!switched) return;
    const ownerUid = d.ownerKind === 'user' ? d.ownerId : (await apps.get(d.ownerId))?.ownerUid;
    if (ownerUid !== undefined) {
      const appId = d.ownerKind === 'app' ? d.ownerId : null;
      await this.#deliveries.notify(ownerUid, 'webhook_disabled', appId, { event_type: d.eventType, reason }, now);
      const why = reason === 'gone' ? 'it answered 410 Gone' : 'its deliveries kept failing';
      await this.#s.notifier.notify(ownerUid, {
        title: `Webhook disabled: ${d.eventType}`,
        body: `Your ${appId ? 'app\'s ' : ''}${d.eventType} webhook was disabled because ${why}. Fix the endpoint, then enable it again.`,
        data: { notification_type: 'webhook_disabled', event_type: d.eventType, ...(appId ? { app_id: appId } : {}) },
        source: 'system',
        ...(appId ? { appId } : {}),
      });
    }
    this.#s.logger.warn({ ownerKind: d.ownerKind, eventType: d.eventType, reason }, 'webhook endpoint disabled');
  }

  /** An app's 2xx answer `{"message": "…"}` joins the conversation's apps_results; anything else is ignored. */
  async #storeReply(d: DeliveryRecord, r: AttemptResult): Promise<void> {
    let message: unknown;
    try {
      message = (JSON.parse(r.reply.toString('utf8')) as { message?: unknown })?.message;
    } catch {
      return;
    }
    if (typeof message !== 'string' || message.trim() === '') return;
    await this.#s.conversations.addAppResult(d.subjectId, { app_id: d.ownerId, content: message.slice(0, MAX_APP_REPLY_CHARS) });
  }

  /** Lets running attempts finish (bounded), then drops the connections even when Redis is gone. */
  async close(timeoutMs = 5000): Promise<void> {
    this.#closing = true;
    await closeWorker(this.worker, this.#connection, timeoutMs);
    await this.#client.close();
  }
}
