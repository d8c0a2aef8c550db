// Indexes by time on the tables the retention sweep prunes (delivery log, app replies, notifications, sync jobs).
import type { Knex } from 'knex';

// Rationale: the sweep deletes rows older than a cutoff across all users; the existing indexes start with the user or
// owner, so without these each sweep would scan its tables whole. One column each: the sweep's other conditions (a
// delivery's state, a job's status) are checked on the few rows the range finds.
const INDEXES = [
  ['webhook_deliveries', 'updated_at', 'webhook_deliveries_updated_idx'],
  ['app_replies', 'received_at', 'app_replies_received_idx'],
  ['proactive_notifications', 'created_at', 'proactive_notifications_created_idx'],
  ['owner_notifications', 'created_at', 'owner_notifications_created_idx'],
  ['notifications', 'created_at', 'notifications_created_idx'],
  ['sync_jobs', 'updated_at', 'sync_jobs_updated_idx'],
] as const;

export async function up(knex: Knex): Promise<void> {
  for (const [table, column, name] of INDEXES) {
    await knex.schema.alterTable(table, (t) => {
      t.index([column], name);
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [table, column, name] of INDEXES) {
    await knex.schema.alterTable(table, (t) => {
      t.dropIndex([column], name);
    });
  }
}
