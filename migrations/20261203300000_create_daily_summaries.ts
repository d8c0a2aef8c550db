// Day summaries: one row per generated summary, the summary_json payload kept as the user reads it.
import type { Knex } from 'knex';

// Rationale: the payload is stored whole (it is read and sent whole, never queried by field). `trigger` keeps the
// scheduled summary (the one the day_summary webhook sends) apart from those a user asked for.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('daily_summaries', (t) => {
    t.string('id', 36).primary();
    t.string('uid', 128).notNullable();
    t.string('date', 10).notNullable();
    t.string('trigger', 16).notNullable();
    t.string('created_at', 32).notNullable();
    t.text('summary_json').notNullable();
    t.index(['uid', 'created_at']);
    t.index(['uid', 'date']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('daily_summaries');
}
