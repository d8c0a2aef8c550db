// Photos attached to a conversation: images a live session assembled from the client's image_chunk messages.
import type { Knex } from 'knex';

// Rationale: the bytes live in the store (blob on sqlite, bytea on PostgreSQL) so a self-hosted node needs no object
// storage; an image is capped at 10 MiB by the assembler. content_type is sniffed from the magic bytes, never taken
// from the client. Rows go with their conversation (foreign key, cascade).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('conversation_photos', (t) => {
    t.string('id', 36).primary();
    t.string('conversation_id', 36).notNullable().references('id').inTable('conversations').onDelete('CASCADE');
    t.string('created_at', 32).notNullable();
    t.binary('bytes').notNullable();
    t.string('content_type', 32).notNullable();
    t.integer('size').notNullable();
    t.index(['conversation_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('conversation_photos');
}
