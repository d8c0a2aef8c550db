// User settings (name, time zone, language, day summary), push tokens (one per device) and the notification outbox.
import type { Knex } from 'knex';

// Rationale: settings are a row of their own, created on first write, so the users table stays what authentication
// reads. The outbox id is an increasing integer: it orders a user's notifications and is the server-sent event id a
// reconnecting client hands back in Last-Event-ID. Push tokens carry a surrogate id so a queued push names one token
// without repeating the token text in Redis.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('user_settings', (t) => {
    t.string('uid', 128).primary();
    t.string('name', 200).nullable();
    t.string('time_zone', 64).nullable();
    t.string('language', 16).nullable();
    t.boolean('daily_summary_enabled').notNullable().defaultTo(true);
    t.integer('daily_summary_hour').notNullable().defaultTo(22);
    t.string('updated_at', 32).notNullable();
  });
  await knex.schema.createTable('push_tokens', (t) => {
    t.string('id', 36).primary();
    t.string('uid', 128).notNullable();
    t.string('token', 1024).notNullable().unique();
    t.string('time_zone', 64).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['uid']);
  });
  await knex.schema.createTable('notifications', (t) => {
    t.bigIncrements('id');
    t.string('uid', 128).notNullable();
    t.string('source', 32).notNullable();
    t.string('app_id', 36).nullable();
    t.text('title').notNullable();
    t.text('body').notNullable();
    t.text('data').notNullable();
    t.string('created_at', 32).notNullable();
    t.string('read_at', 32).nullable();
    t.index(['uid', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('notifications');
  await knex.schema.dropTable('push_tokens');
  await knex.schema.dropTable('user_settings');
}
