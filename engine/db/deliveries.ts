// The webhook delivery log (one row per delivery, updated by every attempt, never a body), each endpoint's health
// (failure run, circuit, disabling) and the notes an owner is told of. Also the log the live senders report their
// dropped batches to.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import { APP_TRIGGER_OF, type WebhookSecretRecord } from './webhooks.js';
import type { LiveDeliveryLog, LiveDeliveryReport, WebhookEventType } from '../webhooks/types.js';
import { bool, isoNow } from './store.js';
import { GroupCommit } from './group-commit.js';
import { execute, inJsonList, keepsStatements, repeat, runInserts, select, type RowValue, type TransactionRun } from './prepared.js';

export type OwnerKind = 'user' | 'app';

/** `pending` (first attempt to come), `retrying`, then one of the ends: delivered, failed, dropped (a live batch given up on), cancelled (its endpoint was disabled or removed). */
export type DeliveryState = 'pending' | 'retrying' | 'delivered' | 'failed' | 'dropped' | 'cancelled';

export const DELIVERY_STATES: readonly DeliveryState[] = ['pending', 'retrying', 'delivered', 'failed', 'dropped', 'cancelled'];

/** States a delivery is still under way in. */
export const OPEN_STATES: readonly DeliveryState[] = ['pending', 'retrying'];

export interface DeliveryRecord {
  /** The `webhook-id` every attempt carries. */
  id: string;
  ownerKind: OwnerKind;
  ownerId: string;
  uid: string;
  eventType: WebhookEventType;
  /** The conversation id, the summary's date, the live session id. */
  subjectId: string;
  state: DeliveryState;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastLatencyMs: number | null;
  nextAttemptAt: string | null;
  bodyBytes: number | null;
  reprocess: boolean;
  createdAt: string;
  updatedAt: string;
  deliveredAt: string | null;
}

export type NewDelivery = Pick<DeliveryRecord, 'id' | 'ownerKind' | 'ownerId' | 'uid' | 'eventType' | 'subjectId' | 'reprocess'>;

export interface AttemptUpdate {
  state: DeliveryState;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastLatencyMs: number | null;
  nextAttemptAt: number | null;
  bodyBytes: number | null;
}

export interface EndpointKey {
  ownerKind: OwnerKind;
  ownerId: string;
  eventType: WebhookEventType;
}

export interface EndpointHealth {
  consecutiveFailures: number;
  firstFailureAt: string | null;
  circuitOpenUntil: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
}

export interface OwnerNotification {
  id: number;
  uid: string;
  kind: string;
  appId: string | null;
  detail: Record<string, unknown>;
  createdAt: string;
}

interface Row {
  id: string;
  owner_kind: string;
  owner_id: string;
  uid: string;
  event_type: string;
  subject_id: string;
  state: string;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  last_latency_ms: number | null;
  next_attempt_at: string | null;
  body_bytes: number | null;
  reprocess: unknown;
  created_at: string;
  updated_at: string;
  delivered_at: string | null;
}

const toRecord = (r: Row): DeliveryRecord => ({
  id: r.id,
  ownerKind: r.owner_kind as OwnerKind,
  ownerId: r.owner_id,
  uid: r.uid,
  eventType: r.event_type as WebhookEventType,
  subjectId: r.subject_id,
  state: r.state as DeliveryState,
  attempts: Number(r.attempts),
  lastStatus: r.last_status === null ? null : Number(r.last_status),
  lastError: r.last_error,
  lastLatencyMs: r.last_latency_ms === null ? null : Number(r.last_latency_ms),
  nextAttemptAt: r.next_attempt_at,
  bodyBytes: r.body_bytes === null ? null : Number(r.body_bytes),
  reprocess: bool(r.reprocess),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  deliveredAt: r.delivered_at,
});

/**
 * What one attempt needs to know before it goes, read in one statement: the delivery, its endpoint's health, where
 * the endpoint points now (the user's URL, or the app's and whether the user still has it installed) and the owner's
 * secret. Read afresh for every attempt, so a changed URL, a disabled endpoint or a rotated secret applies at once.
 */
export interface AttemptView {
  delivery: DeliveryRecord;
  health: Pick<EndpointHealth, 'consecutiveFailures' | 'circuitOpenUntil'>;
  /** The URL the delivery goes to now; undefined when its endpoint is gone, disabled or (an app) uninstalled or re-targeted. */
  url: string | undefined;
  /** The owner's secret row; undefined when it has none yet. */
  secret: Pick<WebhookSecretRecord, 'secret' | 'previousSecret' | 'previousExpiresAt'> | undefined;
}

interface AttemptRow extends Row {
  h_failures: number | null;
  h_open_until: string | null;
  w_url: string | null;
  w_enabled: unknown;
  a_url: string | null;
  a_enabled: unknown;
  a_trigger: string | null;
  i_app: string | null;
  s_secret: string | null;
  s_previous: string | null;
  s_previous_expires: string | null;
}

// The joins match at most one row each: health and secrets by their primary keys, a user's URL by (uid, type), an
// app by id and its install by (app, user).
const ATTEMPT_VIEW_FROM = `FROM webhook_deliveries d
LEFT JOIN webhook_endpoint_health h ON h.owner_kind = d.owner_kind AND h.owner_id = d.owner_id AND h.event_type = d.event_type
LEFT JOIN developer_webhooks w ON d.owner_kind = 'user' AND w.uid = d.owner_id AND w.type = d.event_type
LEFT JOIN apps a ON d.owner_kind = 'app' AND a.id = d.owner_id
LEFT JOIN app_installs i ON i.app_id = a.id AND i.uid = d.uid
LEFT JOIN webhook_secrets s ON s.owner_kind = d.owner_kind AND s.owner_id = d.owner_id
WHERE `;
/** The joined columns of an AttemptRow, by the name it gives them. */
const ATTEMPT_VIEW_JOINED = {
  h_failures: 'h.consecutive_failures',
  h_open_until: 'h.circuit_open_until',
  w_url: 'w.url',
  w_enabled: 'w.enabled',
  a_url: 'a.webhook_url',
  a_enabled: 'a.webhook_enabled',
  a_trigger: 'a.triggers_on',
  i_app: 'i.app_id',
  s_secret: 's.secret',
  s_previous: 's.previous_secret',
  s_previous_expires: 's.previous_expires_at',
} as const;
const ATTEMPT_VIEW_SQL = `SELECT d.*, ${Object.entries(ATTEMPT_VIEW_JOINED).map(([as, col]) => `${col} AS ${as}`).join(', ')} ${ATTEMPT_VIEW_FROM}`;
/** The columns of a Row (every column of webhook_deliveries). */
const ROW_COLUMNS = ['id', 'owner_kind', 'owner_id', 'uid', 'event_type', 'subject_id', 'state', 'attempts', 'last_status', 'last_error', 'last_latency_ms', 'next_attempt_at', 'body_bytes', 'reprocess', 'created_at', 'updated_at', 'delivered_at'] as const;
/**
 * sqlite: each AttemptRow as one JSON object. Rationale: the driver builds a JS value per column on the main thread
 * (~0.3 µs each), where a JSON text is parsed at V8's speed; the columns are text and integers, which JSON gives back
 * unchanged.
 */
const ATTEMPT_VIEW_JSON_SQL = `SELECT json_object(${[...ROW_COLUMNS.map((c) => `'${c}', d.${c}`), ...Object.entries(ATTEMPT_VIEW_JOINED).map(([as, col]) => `'${as}', ${col}`)].join(', ')}) AS r ${ATTEMPT_VIEW_FROM}`;

/** The columns an attempt sets, in the order of the values recordAttempt() writes; delivered_at is kept when null. */
const ATTEMPT_COLUMNS = ['state', 'attempts', 'last_status', 'last_error', 'last_latency_ms', 'next_attempt_at', 'body_bytes', 'updated_at', 'delivered_at'] as const;
const attemptSet = (value: (i: number) => string): string =>
  ATTEMPT_COLUMNS.map((c, i) => (c === 'delivered_at' ? `delivered_at = COALESCE(${value(i)}, webhook_deliveries.delivered_at)` : `${c} = ${value(i)}`)).join(', ');
const RECORD_ATTEMPT_SQL = `UPDATE webhook_deliveries SET ${attemptSet(() => '?')} WHERE id = ?`;
/** sqlite: every attempt of a group in one statement, `[[…values, id], …]` as one JSON array. */
const RECORD_ATTEMPTS_JSON_SQL = `UPDATE webhook_deliveries SET ${attemptSet((i) => `json_extract(j.value, '$[${i}]')`)} FROM json_each(?) AS j WHERE webhook_deliveries.id = json_extract(j.value, '$[${ATTEMPT_COLUMNS.length}]')`;

/** PostgreSQL: every attempt of a group in one statement, VALUES typed as the columns they set (then the id). */
const PG_ATTEMPT_TYPES = ['text', 'integer', 'integer', 'text', 'integer', 'text', 'integer', 'text', 'text', 'text'] as const;
const recordAttemptsPgSql = (n: number): string =>
  `UPDATE webhook_deliveries SET ${attemptSet((i) => `v.${ATTEMPT_COLUMNS[i]}`)} FROM (VALUES ${repeat(n, `(${PG_ATTEMPT_TYPES.map((t) => `?::${t}`).join(', ')})`)}) AS v(${[...ATTEMPT_COLUMNS, 'id'].join(', ')}) WHERE webhook_deliveries.id = v.id`;

/** A write to the log that shares a transaction with the others pending (group commit). */
type LogWrite = { insert: RowValue[][] } | { attempt: RowValue[] };

/** At most this many log writes share one transaction. */
export const DELIVERY_LOG_GROUP_MAX = 256;

async function applyLogWrites(run: TransactionRun, writes: readonly LogWrite[]): Promise<void[]> {
  const rows: RowValue[][] = [];
  const attempts: RowValue[][] = [];
  for (const w of writes) {
    if ('insert' in w) rows.push(...w.insert);
    else attempts.push(w.attempt);
  }
  await runInserts(run, 'webhook_deliveries', DELIVERY_COLUMNS, rows, 'ON CONFLICT (id) DO NOTHING');
  if (attempts.length === 1) await run(RECORD_ATTEMPT_SQL, attempts[0]!);
  else if (attempts.length > 1) await (run.sqlite ? run(RECORD_ATTEMPTS_JSON_SQL, [JSON.stringify(attempts)]) : run(recordAttemptsPgSql(attempts.length), attempts.flat()));
  return writes.map(() => undefined);
}

const DELIVERY_COLUMNS = ['id', 'owner_kind', 'owner_id', 'uid', 'event_type', 'subject_id', 'state', 'attempts', 'reprocess', 'created_at', 'updated_at'] as const;

const keyWhere = (k: EndpointKey): Record<string, string> => ({ owner_kind: k.ownerKind, owner_id: k.ownerId, event_type: k.eventType });

/** A new `webhook-id`: `msg_` and 32 hex digits. */
export const newWebhookId = (): string => `msg_${randomUUID().replace(/-/g, '')}`;

export class DeliveriesRepository implements LiveDeliveryLog {
  /**
   * New rows and attempts: every delivery writes both, and those arriving while a transaction runs share the next one
   * (sqlite: one statement each for all of them) instead of taking the write lock one by one.
   */
  readonly #writes: GroupCommit<LogWrite>;

  constructor(
    private readonly knex: Knex,
    private readonly now: () => number,
    private readonly logger?: Logger,
  ) {
    this.#writes = new GroupCommit(knex, applyLogWrites, DELIVERY_LOG_GROUP_MAX);
  }

  /** Inserts the deliveries not recorded yet; an id seen before is left as it is. */
  async insert(rows: readonly NewDelivery[]): Promise<void> {
    if (rows.length === 0) return;
    const at = isoNow(this.now());
    await this.#writes.submit({ insert: rows.map((r) => [r.id, r.ownerKind, r.ownerId, r.uid, r.eventType, r.subjectId, 'pending', 0, r.reprocess, at, at]) });
  }

  async get(id: string): Promise<DeliveryRecord | undefined> {
    const [row] = await select<Row>(this.knex, 'SELECT * FROM webhook_deliveries WHERE id = ?', [id]);
    return row ? toRecord(row) : undefined;
  }

  /**
   * The deliveries and what their next attempts depend on (AttemptView), in one read whatever their number; ids with
   * no delivery are absent from the map.
   */
  async attemptViews(ids: readonly string[]): Promise<Map<string, AttemptView>> {
    const out = new Map<string, AttemptView>();
    if (ids.length === 0) return out;
    const rows = keepsStatements(this.knex)
      ? (await select<{ r: string }>(this.knex, ATTEMPT_VIEW_JSON_SQL + inJsonList(this.knex, 'd.id'), [JSON.stringify(ids)])).map((x) => JSON.parse(x.r) as AttemptRow)
      : await select<AttemptRow>(this.knex, ATTEMPT_VIEW_SQL + inJsonList(this.knex, 'd.id'), [JSON.stringify(ids)]);
    for (const r of rows) {
      const delivery = toRecord(r);
      let url: string | undefined;
      if (delivery.ownerKind === 'user') url = r.w_url !== null && bool(r.w_enabled) ? r.w_url : undefined;
      else url = r.a_url !== null && bool(r.a_enabled) && r.a_trigger === APP_TRIGGER_OF[delivery.eventType] && r.i_app !== null ? r.a_url : undefined;
      out.set(delivery.id, {
        delivery,
        health: { consecutiveFailures: r.h_failures === null ? 0 : Number(r.h_failures), circuitOpenUntil: r.h_open_until },
        url,
        secret: r.s_secret === null ? undefined : { secret: r.s_secret, previousSecret: r.s_previous, previousExpiresAt: r.s_previous_expires },
      });
    }
    return out;
  }

  /** An owner's deliveries, newest first (ties by id, so pages are stable); `limit` + 1 rows tell whether more follow. */
  async listForOwner(ownerKind: OwnerKind, ownerId: string, limit: number, offset: number): Promise<DeliveryRecord[]> {
    const rows = (await this.knex('webhook_deliveries')
      .where({ owner_kind: ownerKind, owner_id: ownerId })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(limit)
      .offset(offset)) as Row[];
    return rows.map(toRecord);
  }

  /** Records one attempt (or the end without one, attempts unchanged). */
  async recordAttempt(id: string, u: AttemptUpdate): Promise<void> {
    const at = isoNow(this.now());
    const latency = u.lastLatencyMs === null ? null : Math.round(u.lastLatencyMs);
    const next = u.nextAttemptAt === null ? null : isoNow(u.nextAttemptAt);
    await this.#writes.submit({ attempt: [u.state, u.attempts, u.lastStatus, u.lastError, latency, next, u.bodyBytes, at, u.state === 'delivered' ? at : null, id] });
  }

  /** When the next attempt is due (a circuit held it back), without counting an attempt. */
  async setNextAttempt(id: string, at: number): Promise<void> {
    await this.knex('webhook_deliveries').where({ id }).update({ next_attempt_at: isoNow(at), updated_at: isoNow(this.now()) });
  }

  /** Moves a delivery from one of `from` to `to`; false when it was in none of them (another caller won). */
  async transition(id: string, from: readonly DeliveryState[], to: DeliveryState): Promise<boolean> {
    const n = await this.knex('webhook_deliveries').where({ id }).whereIn('state', from).update({ state: to, next_attempt_at: null, updated_at: isoNow(this.now()) });
    return n > 0;
  }

  /** Ends an endpoint's deliveries still under way as `cancelled` (it was disabled); answers how many. */
  async cancelOpen(k: EndpointKey): Promise<number> {
    return this.knex('webhook_deliveries').where(keyWhere(k)).whereIn('state', OPEN_STATES).update({ state: 'cancelled', next_attempt_at: null, updated_at: isoNow(this.now()) });
  }

  async health(k: EndpointKey): Promise<EndpointHealth> {
    const r = (await this.knex('webhook_endpoint_health').where(keyWhere(k)).first()) as
      | { consecutive_failures: number; first_failure_at: string | null; circuit_open_until: string | null; disabled_at: string | null; disabled_reason: string | null }
      | undefined;
    return {
      consecutiveFailures: r ? Number(r.consecutive_failures) : 0,
      firstFailureAt: r?.first_failure_at ?? null,
      circuitOpenUntil: r?.circuit_open_until ?? null,
      disabledAt: r?.disabled_at ?? null,
      disabledReason: r?.disabled_reason ?? null,
    };
  }

  /** A delivered attempt ends the endpoint's failure run and closes its circuit. */
  async recordSuccess(k: EndpointKey): Promise<void> {
    await execute(
      this.knex,
      'UPDATE webhook_endpoint_health SET consecutive_failures = 0, first_failure_at = NULL, circuit_open_until = NULL WHERE owner_kind = ? AND owner_id = ? AND event_type = ? AND consecutive_failures > 0',
      [k.ownerKind, k.ownerId, k.eventType],
    );
  }

  /**
   * Counts a failed attempt in the endpoint's run (one statement, so jobs processes failing at once all count); from
   * `circuitAfter` failures on, the circuit stays open until `openUntil`. Answers the health after it.
   */
  async recordFailure(k: EndpointKey, now: number, circuitAfter: number, openUntil: number): Promise<EndpointHealth> {
    const t = 'webhook_endpoint_health';
    await this.knex(t)
      .insert({ ...keyWhere(k), consecutive_failures: 1, first_failure_at: isoNow(now) })
      .onConflict(['owner_kind', 'owner_id', 'event_type'])
      .merge({ consecutive_failures: this.knex.raw('??.?? + 1', [t, 'consecutive_failures']), first_failure_at: this.knex.raw('COALESCE(??.??, ?)', [t, 'first_failure_at', isoNow(now)]) });
    await this.knex(t).where(keyWhere(k)).where('consecutive_failures', '>=', circuitAfter).update({ circuit_open_until: isoNow(openUntil) });
    return this.health(k);
  }

  /**
   * Half-open: the one caller that moves the circuit's end from `seen` (already past) to `until` sends the probe;
   * everyone else waits for its answer.
   */
  async claimProbe(k: EndpointKey, seen: string, until: number): Promise<boolean> {
    return (await this.knex('webhook_endpoint_health').where(keyWhere(k)).where({ circuit_open_until: seen }).update({ circuit_open_until: isoNow(until) })) > 0;
  }

  /** Records the endpoint disabled (`reason`: gone, failing) and starts a fresh run should it be enabled again. */
  async markDisabled(k: EndpointKey, reason: string, now: number): Promise<void> {
    const fields = { disabled_at: isoNow(now), disabled_reason: reason, consecutive_failures: 0, first_failure_at: null, circuit_open_until: null };
    await this.knex('webhook_endpoint_health').insert({ ...keyWhere(k), ...fields }).onConflict(['owner_kind', 'owner_id', 'event_type']).merge(fields);
  }

  /** A note for a user (an endpoint of theirs or of their app was disabled), for the notifications to push. */
  async notify(uid: string, kind: string, appId: string | null, detail: Record<string, unknown>, now: number): Promise<void> {
    await this.knex('owner_notifications').insert({ uid, kind, app_id: appId, detail: JSON.stringify(detail), created_at: isoNow(now), sent_at: null });
  }

  /** A user's notes not sent yet, oldest first. */
  async unsentNotifications(uid: string): Promise<OwnerNotification[]> {
    const rows = (await this.knex('owner_notifications').where({ uid }).whereNull('sent_at').orderBy('id')) as { id: number; uid: string; kind: string; app_id: string | null; detail: string; created_at: string }[];
    return rows.map((r) => ({ id: Number(r.id), uid: r.uid, kind: r.kind, appId: r.app_id, detail: JSON.parse(r.detail) as Record<string, unknown>, createdAt: r.created_at }));
  }

  /** LiveDeliveryLog: a live batch given up on becomes a `dropped` row (content-free), written in the background. */
  dropped(report: LiveDeliveryReport): void {
    const at = isoNow(this.now());
    const l = report.last;
    void this.knex('webhook_deliveries')
      .insert({
        id: report.webhookId, owner_kind: report.endpoint.ownerKind, owner_id: report.endpoint.ownerId, uid: report.uid, event_type: report.eventType,
        subject_id: report.sessionId, state: 'dropped', attempts: report.attempts, last_status: l.status, last_error: l.error ?? l.outcome,
        last_latency_ms: Math.round(l.latencyMs), next_attempt_at: null, body_bytes: report.bodyBytes, reprocess: false, created_at: at, updated_at: at,
      })
      .onConflict('id')
      .ignore()
      .catch((err: unknown) => this.logger?.warn({ err: { name: (err as Error)?.name } }, 'dropped live delivery not recorded'));
  }
}
