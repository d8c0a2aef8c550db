// Apps and their installs, developer webhook settings and webhook signing secrets.
import type { Knex } from 'knex';

// Rationale: an app's capabilities and scopes are small JSON arrays in text columns (read whole, never queried
// inside); its trigger is a column of its own because the delivery query selects on it. Webhook secrets must be
// readable by the service to sign, so they are stored as they are (the deployment has no encryption key to wrap
// them with); app secrets, which only need checking, are stored as SHA-256 hashes like API keys. Owner ids carry no
// foreign key to users: a user's row may not exist yet when they first configure a webhook.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('apps', (t) => {
    t.string('id', 36).primary();
    t.string('owner_uid', 128).notNullable();
    t.string('name', 200).notNullable();
    t.text('description').notNullable();
    t.text('capabilities').notNullable();
    t.string('triggers_on', 32).nullable();
    t.text('webhook_url').nullable();
    t.boolean('webhook_enabled').notNullable().defaultTo(true);
    t.text('proactive_scopes').notNullable();
    t.text('setup_completed_url').nullable();
    t.text('auth_url').nullable();
    t.text('setup_instructions').nullable();
    t.boolean('private').notNullable().defaultTo(true);
    t.string('secret_hash', 64).notNullable().unique();
    t.string('secret_prefix', 32).notNullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['owner_uid', 'created_at']);
  });
  await knex.schema.createTable('app_installs', (t) => {
    t.string('app_id', 36).notNullable().references('id').inTable('apps').onDelete('CASCADE');
    t.string('uid', 128).notNullable();
    t.text('scopes').notNullable();
    t.string('installed_at', 32).notNullable();
    t.primary(['app_id', 'uid']);
    t.index(['uid']);
  });
  await knex.schema.createTable('developer_webhooks', (t) => {
    t.string('uid', 128).notNullable();
    t.string('type', 32).notNullable();
    t.text('url').notNullable();
    t.integer('seconds').nullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.string('updated_at', 32).notNullable();
    t.primary(['uid', 'type']);
  });
  await knex.schema.createTable('webhook_secrets', (t) => {
    t.string('owner_kind', 8).notNullable();
    t.string('owner_id', 128).notNullable();
    t.string('secret', 128).notNullable();
    t.string('previous_secret', 128).nullable();
    t.string('previous_expires_at', 32).nullable();
    t.string('created_at', 32).notNullable();
    t.string('rotated_at', 32).nullable();
    t.primary(['owner_kind', 'owner_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_secrets');
  await knex.schema.dropTable('developer_webhooks');
  await knex.schema.dropTable('app_installs');
  await knex.schema.dropTable('apps');
}
