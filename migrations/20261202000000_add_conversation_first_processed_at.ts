// When a conversation's first completion was announced, and indexes to find what a crash left behind.
import type { Knex } from 'knex';

// Rationale: the conversation-created event fires once, when a conversation first completes; a later completion (an
// owner's reprocess) must be told apart, across nodes and restarts, so the first one is recorded on the row once it
// has been announced. The two indexes serve a jobs node's start-up scans: conversations left in `processing`, and
// completed ones never announced (null first_processed_at: few rows). Neither column changes on the live
// transcript's writes.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.string('first_processed_at', 32).nullable();
    t.index(['status'], 'conversations_status_idx');
    t.index(['first_processed_at'], 'conversations_first_processed_idx');
  });
  // Conversations completed before this column existed were announced already.
  await knex('conversations').where({ status: 'completed' }).update({ first_processed_at: knex.ref('updated_at') });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    t.dropIndex(['first_processed_at'], 'conversations_first_processed_idx');
    t.dropIndex(['status'], 'conversations_status_idx');
    t.dropColumn('first_processed_at');
  });
}
