// Users (identified by the ID token's `sub`) and their API keys; only key hashes are stored.
import type { Knex } from 'knex';

// Rationale: timestamps are ISO 8601 UTC strings ("2026-11-23T10:00:00.000Z") in text columns on both dialects,
// so they sort as text, compare the same in sqlite and PostgreSQL, and come back without driver-specific Date handling.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('users', (t) => {
    t.string('id', 128).primary();
    t.string('created_at', 32).notNullable();
    t.boolean('memory_access_enabled').notNullable().defaultTo(false);
  });
  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable().references('id').inTable('users').onDelete('CASCADE');
    t.string('kind', 8).notNullable();
    t.string('name', 200).notNullable();
    t.string('key_hash', 64).notNullable().unique();
    t.string('key_prefix', 32).notNullable();
    t.text('scopes').notNullable();
    t.string('created_at', 32).notNullable();
    t.string('last_used_at', 32).nullable();
    t.index(['user_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('api_keys');
  await knex.schema.dropTable('users');
}
