// Speech-to-text usage: seconds of audio and words transcribed per user, UTC day and provider.
import type { Knex } from 'knex';

// Rationale: one row per (uid, day, provider), written by an atomic upsert that adds to the row
// (`ON CONFLICT … DO UPDATE SET x = x + excluded.x`, the same statement on sqlite and PostgreSQL), so nodes
// never read-modify-write. `day` is YYYY-MM-DD in UTC, text like every date here, so ranges compare as strings.
// uid carries no foreign key: usage is recorded for accounts whose users row may not exist yet.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('stt_usage', (t) => {
    t.string('uid', 128).notNullable();
    t.string('day', 10).notNullable();
    t.string('provider', 32).notNullable();
    t.double('audio_seconds').notNullable().defaultTo(0);
    t.integer('words').notNullable().defaultTo(0);
    t.primary(['uid', 'day', 'provider']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('stt_usage');
}
