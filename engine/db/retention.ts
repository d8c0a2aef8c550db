// Records that are logs rather than the user's data are kept for a bounded time: the webhook delivery log, what apps
// answered live transcripts and what became of it, owners' notices, users' notifications, finished sync jobs, and the
// record of deleted accounts.
// Conversations, memories, action items, summaries and voice profiles are the user's and are never pruned here.
import type { Knex } from 'knex';
import { isoNow } from './store.js';

const DAY_MS = 24 * 3600_000;

/** What one rule prunes: rows of `table` whose `column` (an ISO time) is older than `keepMs`, and that `where` allows. */
export interface RetentionRule {
  table: string;
  column: string;
  keepMs: number;
  where?: (q: Knex.QueryBuilder) => Knex.QueryBuilder;
}

/** The operator's retention periods, in days (LOG_RETENTION_DAYS, NOTIFICATION_RETENTION_DAYS); 0 keeps those rows. */
export interface RetentionDays {
  logs: number;
  notifications: number;
}

/** How long a deleted account's record lasts: past it, an ID token issued before the deletion is accepted again. */
const DELETED_ACCOUNT_KEEP_MS = 30 * DAY_MS;

/** How long each log is kept. Ended deliveries only: one still under way keeps its row however old. */
export function retentionRules(days: RetentionDays = { logs: 30, notifications: 90 }): RetentionRule[] {
  const logs = days.logs * DAY_MS;
  const rules: RetentionRule[] = [
    { table: 'webhook_deliveries', column: 'updated_at', keepMs: logs, where: (q) => q.whereIn('state', ['delivered', 'failed', 'dropped', 'cancelled']) },
    { table: 'app_replies', column: 'received_at', keepMs: logs },
    { table: 'proactive_notifications', column: 'created_at', keepMs: logs },
    { table: 'owner_notifications', column: 'created_at', keepMs: logs, where: (q) => q.whereNotNull('sent_at') },
    { table: 'notifications', column: 'created_at', keepMs: days.notifications * DAY_MS },
    { table: 'sync_jobs', column: 'updated_at', keepMs: logs, where: (q) => q.whereIn('status', ['completed', 'failed']) },
    // Not the operator's to keep longer: it refuses tokens (Firebase's live for an hour), it holds nothing else.
    { table: 'deleted_accounts', column: 'deleted_at', keepMs: DELETED_ACCOUNT_KEEP_MS },
  ];
  return rules.filter((r) => r.keepMs > 0);
}

/** How often a jobs node prunes. */
export const RETENTION_INTERVAL_MS = 3600_000;

/** Rows deleted per statement: a large backlog is pruned in steps, so no one statement holds the store long. */
export const RETENTION_CHUNK = 1000;

export class Retention {
  constructor(
    private readonly knex: Knex,
    private readonly rules: readonly RetentionRule[] = retentionRules(),
  ) {}

  /** Deletes what every rule no longer keeps at `nowMs`; answers the rows deleted by table. */
  async sweep(nowMs: number): Promise<Map<string, number>> {
    const deleted = new Map<string, number>();
    for (const rule of this.rules) {
      const cutoff = isoNow(nowMs - rule.keepMs);
      let total = 0;
      for (;;) {
        const old = this.knex(rule.table).select('id').where(rule.column, '<', cutoff).limit(RETENTION_CHUNK);
        const n = await this.knex(rule.table).whereIn('id', rule.where ? rule.where(old) : old).del();
        total += n;
        if (n < RETENTION_CHUNK) break;
      }
      if (total > 0) deleted.set(rule.table, total);
    }
    return deleted;
  }
}
