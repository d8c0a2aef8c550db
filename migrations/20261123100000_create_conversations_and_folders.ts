// Conversations with their transcript segments, and the folders that group them.
import type { Knex } from 'knex';

// Rationale: segments live in their own table because the live engine appends and replaces them every 600 ms;
// rewriting one JSON column per tick would copy the whole transcript each time. Action items and events of the
// summary are read and written with the conversation as a whole, so they stay in one JSON text column.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('folders', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable().references('id').inTable('users').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.unique(['user_id', 'name']);
  });
  await knex.schema.createTable('conversations', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable().references('id').inTable('users').onDelete('CASCADE');
    t.string('status', 16).notNullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    // Never null in practice (a stub takes its creation time), so lists can order and filter on it.
    t.string('started_at', 32).notNullable();
    t.string('finished_at', 32).nullable();
    t.string('source', 64).nullable();
    t.string('language', 16).nullable();
    t.string('text_source', 16).nullable();
    t.string('text_source_spec', 200).nullable();
    t.text('title').notNullable().defaultTo('');
    t.text('overview').notNullable().defaultTo('');
    t.string('emoji', 16).notNullable().defaultTo('🧠');
    t.string('category', 32).notNullable().defaultTo('other');
    // {"action_items": [...], "events": [...]} as the developer view shows them.
    t.text('structured_extra').notNullable().defaultTo('{"action_items":[],"events":[]}');
    t.string('produced_by', 24).nullable();
    t.boolean('discarded').notNullable().defaultTo(false);
    t.boolean('deleted').notNullable().defaultTo(false);
    t.string('visibility', 16).notNullable().defaultTo('private');
    t.string('folder_id', 36).nullable().references('id').inTable('folders').onDelete('SET NULL');
    t.text('geolocation').nullable();
    // The list query: one user's completed, kept conversations, newest first.
    t.index(['user_id', 'status', 'discarded', 'deleted', 'started_at'], 'conversations_list_idx');
    t.index(['user_id', 'folder_id']);
  });
  await knex.schema.createTable('conversation_segments', (t) => {
    t.string('conversation_id', 36).notNullable().references('id').inTable('conversations').onDelete('CASCADE');
    t.integer('position').notNullable();
    t.string('id', 64).notNullable();
    t.text('text').notNullable();
    t.string('speaker', 32).notNullable().defaultTo('SPEAKER_00');
    t.integer('speaker_id').nullable();
    t.boolean('is_user').notNullable().defaultTo(false);
    t.string('person_id', 64).nullable();
    t.double('start').notNullable();
    t.double('end').notNullable();
    t.string('stt_provider', 32).nullable();
    t.boolean('speech_profile_processed').notNullable().defaultTo(false);
    t.primary(['conversation_id', 'position']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('conversation_segments');
  await knex.schema.dropTable('conversations');
  await knex.schema.dropTable('folders');
}
