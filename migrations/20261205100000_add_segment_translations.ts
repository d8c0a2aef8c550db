// Translations of a live transcript segment (sessions with `language=multi`), as a JSON array on the segment's row.
import type { Knex } from 'knex';

// Rationale: a segment has one or two translations and they are read with the segment, so a JSON text column on its
// row serves them without a join. The live loop's tail rewrites leave the column out (a rewritten row starts without
// translations, since its text may have changed); the session stores a translation again when its text did not.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversation_segments', (t) => {
    t.text('translations').nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversation_segments', (t) => {
    t.dropColumn('translations');
  });
}
