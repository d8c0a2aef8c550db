// Offline sync: one row per batch a device uploaded (its files' progress as JSON), and the content hashes of the files
// already taken, so that the same recording uploaded again is not transcribed twice.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sync_jobs', (t) => {
    t.string('id', 36).primary();
    t.string('user_id', 128).notNullable();
    t.string('status', 16).notNullable();
    t.text('files').notNullable();
    t.double('audio_s').notNullable().defaultTo(0);
    t.string('created_at', 32).notNullable();
    t.string('updated_at', 32).notNullable();
    t.index(['user_id', 'status']);
  });
  await knex.schema.createTable('sync_files', (t) => {
    t.string('user_id', 128).notNullable();
    t.string('sha256', 64).notNullable();
    t.string('job_id', 36).notNullable();
    t.string('created_at', 32).notNullable();
    t.primary(['user_id', 'sha256']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('sync_files');
  await knex.schema.dropTable('sync_jobs');
}
