// What became of each proactive notification request and pushed reply message of a live transcript endpoint.
import type { Knex } from 'knex';

// Rationale: one row per reply acted on, content-free (app, trigger, outcome and the notification it made, if any),
// so an app owner or operator can see why a notification did or did not reach the user. Listed per user by time.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('proactive_notifications', (t) => {
    t.increments('id').primary();
    t.string('uid', 128).notNullable();
    t.string('app_id', 36).nullable();
    t.string('reply_id', 36).notNullable();
    t.string('session_id', 64).notNullable();
    t.string('trigger', 16).notNullable();
    t.string('outcome', 24).notNullable();
    t.bigInteger('notification_id').nullable();
    t.string('created_at', 32).notNullable();
    t.index(['uid', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('proactive_notifications');
}
