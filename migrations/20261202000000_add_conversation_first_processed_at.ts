// When a conversation first completed processing, and an index to find conversations left in `processing`.
import type { Knex } from 'knex';

// Rationale: the conversation-created event fires once, when a conversation first completes; a later completion (an
// owner's reprocess) must be told apart, across nodes and restarts, so the first one is recorded on the row. The
// status index serves the start-up scan of a jobs node for conversations a crash left in `processing`; it changes
// only when a status does, not on the live transcript's writes.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.string('first_processed_at', 32).nullable();
    t.index(['status'], 'conversations_status_idx');
  });
  // Conversations completed before this column existed have fired already.
  await knex('conversations').where({ status: 'completed' }).update({ first_processed_at: knex.ref('updated_at') });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['status'], 'conversations_status_idx');
    t.dropColumn('first_processed_at');
  });
}
