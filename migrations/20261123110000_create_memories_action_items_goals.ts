// Developer data: memories, standalone action items, goals and their per-day progress history.
import type { Knex } from 'knex';

// Rationale: user_id and conversation_id carry no foreign key. Rows are also written by the conversation processor,
// which may run for an account before its users row exists, and the conversations table belongs to another
// migration; both columns are indexed so per-user and per-conversation reads stay cheap. Timestamps are ISO 8601
// UTC text (as in the first migration); tags are a JSON array in a text column.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('memories', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable();
    t.text('content').notNullable();
    t.string('category', 16).notNullable();
    t.string('visibility', 8).notNullable();
    t.text('tags').notNullable();
    t.boolean('manually_added').notNullable();
    t.string('conversation_id', 128).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['user_id', 'created_at']);
    t.index(['conversation_id']);
  });
  await knex.schema.createTable('action_items', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable();
    t.text('description').notNullable();
    t.boolean('completed').notNullable();
    t.string('due_at', 32).nullable();
    t.string('completed_at', 32).nullable();
    t.string('conversation_id', 128).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['user_id', 'created_at']);
    t.index(['conversation_id']);
  });
  await knex.schema.createTable('goals', (t) => {
    t.string('id', 32).primary();
    t.string('user_id', 128).notNullable();
    t.text('title').notNullable();
    t.string('goal_type', 8).notNullable();
    t.double('target_value').notNullable();
    t.double('current_value').notNullable();
    t.double('min_value').notNullable();
    t.double('max_value').notNullable();
    t.string('unit', 100).nullable();
    t.boolean('is_active').notNullable();
    t.string('ended_at', 32).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['user_id', 'is_active', 'created_at']);
  });
  // One row per goal and UTC day: the last progress value of the day overwrites the earlier ones.
  await knex.schema.createTable('goal_history', (t) => {
    t.string('goal_id', 32).notNullable().references('id').inTable('goals').onDelete('CASCADE');
    t.string('date', 10).notNullable();
    t.double('value').notNullable();
    t.string('recorded_at', 32).notNullable();
    t.primary(['goal_id', 'date']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('goal_history');
  await knex.schema.dropTable('goals');
  await knex.schema.dropTable('action_items');
  await knex.schema.dropTable('memories');
}
