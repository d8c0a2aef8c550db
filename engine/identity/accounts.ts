// Deleting an account: the user's live sessions closed on every node, every row of theirs erased from the store
// (with the apps they own), their keys forgotten by every node's cache, their unfinished uploads removed. What is on
// nodes' disks for their conversations (kept audio, audio logs) goes with the sweeps that find its conversation gone.
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import type { VersionedWrites } from '../cache/data-versions.js';
import type { SessionEvents } from '../jobs/session-events.js';
import type { Authenticator } from './authenticator.js';
import type { UploadStore } from '../sync/uploads.js';
import { eraseAccount, type DeletedAccounts } from '../db/accounts.js';

/** How long the nodes get to finish and close the user's live sessions before the rows go regardless. */
export const CLOSE_SESSIONS_MS = 15_000;

export interface AccountsOptions {
  knex: Knex;
  events: SessionEvents;
  authenticator: Pick<Authenticator, 'revoked' | 'accountDeleted'>;
  deleted: Pick<DeletedAccounts, 'record'>;
  now: () => number;
  uploads: Pick<UploadStore, 'removeAllFor'>;
  versions: VersionedWrites;
  logger: Logger;
}

/** What a deletion did. */
export interface DeletedAccount {
  /** Live sessions closed, on every node. */
  sessions: number;
  /** Rows erased from the store. */
  rows: number;
  /** Unfinished offline uploads removed. */
  uploads: number;
}

export class Accounts {
  constructor(private readonly o: AccountsOptions) {}

  /**
   * Deletes `uid`'s account. Its ID tokens are refused first, so a device told to go does not come back and start a
   * new account with the token it holds; then the sessions close (each finishes its audio), so nothing they write
   * comes after the erasure. A deletion cut short (the store or Redis away) is finished by asking again.
   */
  async delete(uid: string): Promise<DeletedAccount> {
    const { knex, events, authenticator, uploads, versions, logger } = this.o;
    await this.o.deleted.record(uid, this.o.now());
    await authenticator.accountDeleted(uid);
    const answers = await events.requestClose(uid, CLOSE_SESSIONS_MS);
    // A write of the user's data: every node's cached answers about them are stale after it.
    const erased = await versions.write(uid, () => eraseAccount(knex, uid));
    for (const hash of erased.keyHashes) await authenticator.revoked(hash);
    const removed = await uploads.removeAllFor(uid);
    const done = { sessions: answers.reduce((n, a) => n + a.sessions, 0), rows: erased.rows, uploads: removed };
    logger.info({ uid, ...done }, 'account deleted');
    return done;
  }
}
