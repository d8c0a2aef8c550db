// Voiceprints: the user's speech profile, the people they name, each person's voice samples, with the audio kept.
import type { Knex } from 'knex';

// Rationale: audio is kept beside every embedding (16 kHz mono s16le PCM) because embeddings are only as good as the
// model that made them: `embedding_model` names it, and a node running another model recomputes from the audio on
// first use. Embeddings are little-endian float32 bytes, never queried by value. A person's print is the normalised
// mean of its samples' embeddings, kept on the person row so that a live session loads one row per person.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('speech_profiles', (t) => {
    t.string('uid', 128).primary();
    t.binary('audio').notNullable();
    t.double('speech_seconds').notNullable();
    t.binary('embedding').nullable();
    t.string('embedding_model', 200).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
  });
  await knex.schema.createTable('people', (t) => {
    t.string('id', 36).primary();
    t.string('uid', 128).notNullable();
    t.string('name', 200).notNullable();
    // Lower-cased name for "my name is …" lookups, the same on both dialects (sqlite's lower() is ASCII only).
    t.string('name_key', 200).notNullable();
    t.binary('embedding').nullable();
    t.string('embedding_model', 200).nullable();
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['uid', 'created_at']);
    t.index(['uid', 'name_key']);
  });
  await knex.schema.createTable('person_samples', (t) => {
    t.string('id', 36).primary();
    t.string('uid', 128).notNullable();
    t.string('person_id', 36).notNullable().references('id').inTable('people').onDelete('CASCADE');
    t.binary('audio').notNullable();
    t.double('seconds').notNullable();
    t.string('conversation_id', 36).nullable();
    t.string('segment_id', 64).nullable();
    t.binary('embedding').nullable();
    t.string('embedding_model', 200).nullable();
    t.string('created_at', 32).notNullable();
    t.index(['person_id', 'created_at']);
    t.index(['uid']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('person_samples');
  await knex.schema.dropTable('people');
  await knex.schema.dropTable('speech_profiles');
}
