// The webhook delivery log, each endpoint's health (failure run, circuit, disabling), notes for owners, and the
// replies apps give to a created conversation.
import type { Knex } from 'knex';

// Rationale: a delivery row holds what its owner reads in the delivery log (ids, state, counts, codes, times) and
// never a body. Health is one row per (owner, event type), the unit an endpoint is disabled at; its circuit is shared
// by every jobs process through the store. Apps' replies are a small JSON array on the conversation, read whole.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.string('id', 64).primary();
    t.string('owner_kind', 8).notNullable();
    t.string('owner_id', 128).notNullable();
    t.string('uid', 128).notNullable();
    t.string('event_type', 32).notNullable();
    t.string('subject_id', 128).notNullable();
    t.string('state', 16).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('last_status').nullable();
    t.string('last_error', 64).nullable();
    t.integer('last_latency_ms').nullable();
    t.string('next_attempt_at', 32).nullable();
    t.integer('body_bytes').nullable();
    t.boolean('reprocess').notNullable().defaultTo(false);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.string('delivered_at', 32).nullable();
    t.index(['owner_kind', 'owner_id', 'created_at'], 'webhook_deliveries_owner_idx');
    t.index(['owner_kind', 'owner_id', 'event_type', 'state'], 'webhook_deliveries_endpoint_idx');
  });
  await knex.schema.createTable('webhook_endpoint_health', (t) => {
    t.string('owner_kind', 8).notNullable();
    t.string('owner_id', 128).notNullable();
    t.string('event_type', 32).notNullable();
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.string('first_failure_at', 32).nullable();
    t.string('circuit_open_until', 32).nullable();
    t.string('disabled_at', 32).nullable();
    t.string('disabled_reason', 32).nullable();
    t.primary(['owner_kind', 'owner_id', 'event_type']);
  });
  await knex.schema.createTable('owner_notifications', (t) => {
    t.increments('id').primary();
    t.string('uid', 128).notNullable();
    t.string('kind', 32).notNullable();
    t.string('app_id', 36).nullable();
    t.text('detail').notNullable();
    t.string('created_at', 32).notNullable();
    t.string('sent_at', 32).nullable();
    t.index(['uid', 'created_at']);
  });
  await knex.schema.alterTable('conversations', (t) => {
    t.text('apps_results').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.dropColumn('apps_results');
  });
  await knex.schema.dropTable('owner_notifications');
  await knex.schema.dropTable('webhook_endpoint_health');
  await knex.schema.dropTable('webhook_deliveries');
}
