// Deleted accounts: when each was deleted, so that ID tokens issued before it are refused instead of signing a
// device still holding one into a new, empty account.
import type { Knex } from 'knex';

// Rationale: the row names the account by the SHA-256 of its user id, not the id itself: it says that an account
// was deleted, and when, without keeping who it was. Rows are pruned by age (the retention sweep), hence the index.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('deleted_accounts', (t) => {
    t.string('id', 64).primary();
    t.string('deleted_at', 32).notNullable();
    t.index(['deleted_at'], 'deleted_accounts_deleted_idx');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('deleted_accounts');
}
