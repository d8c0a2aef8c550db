// What a live transcript endpoint answered with: a message to push to the user, or a proactive notification request.
import type { Knex } from 'knex';

// Rationale: a reply is kept as its JSON text (read whole, never queried inside), bounded by the sender; `app_id` is
// null for the user's own developer webhook. Listed per user by time, which is how notifications will read them.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('app_replies', (t) => {
    t.string('id', 36).primary();
    t.string('app_id', 36).nullable();
    t.string('uid', 128).notNullable();
    t.string('session_id', 64).notNullable();
    t.string('kind', 16).notNullable();
    t.text('reply').notNullable();
    t.string('received_at', 32).notNullable();
    t.index(['uid', 'received_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('app_replies');
}
