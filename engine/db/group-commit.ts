// Group commit: writes that arrive while a transaction runs go together in the next one, because every talking session
// writes its transcript every 600 ms and a transaction each would cost a BEGIN and a COMMIT per write.
import type { Knex } from 'knex';
import { writeTransaction, type TransactionRun } from './prepared.js';

interface Pending<T, R> {
  op: T;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
  /** When it was submitted (the `now` clock). */
  at: number;
}

/**
 * The first write runs at once (no added latency on a quiet node); those that queue behind it share one transaction.
 * After a failed group each write is retried alone and answers for itself, unless the transaction never began (the
 * store failed, not a write).
 */
export class GroupCommit<T, R = void> {
  readonly #knex: Knex;
  readonly #apply: (run: TransactionRun, ops: readonly T[]) => Promise<R[]>;
  readonly #maxOps: number;
  readonly #now: () => number;
  #queue: Pending<T, R>[] = [];
  #running = false;
  /** When the oldest write of the group being committed was submitted. */
  #runningSince: number | undefined;
  /** Writes of the group being committed. */
  #runningOps = 0;

  /**
   * `apply` runs the statements of the writes it is given inside their shared transaction and resolves to each one's
   * result, in order (it may write them together); at most `maxOps` writes share one. `now` (ms) times the backlog.
   */
  constructor(knex: Knex, apply: (run: TransactionRun, ops: readonly T[]) => Promise<R[]>, maxOps = 64, now: () => number = () => performance.now()) {
    this.#knex = knex;
    this.#apply = apply;
    this.#maxOps = maxOps;
    this.#now = now;
  }

  /** Resolves to `apply`'s result once `op` is committed; rejects with its own error only. */
  submit(op: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ op, resolve, reject, at: this.#now() });
      if (!this.#running) void this.#drain();
    });
  }

  /**
   * How long the oldest write not yet committed (or failed) has waited, in ms; 0 with none. Writes arriving faster
   * than the store commits them make it grow without bound (and every waiting session's transcript with it).
   */
  backlogMs(): number {
    const oldest = this.#runningSince ?? this.#queue[0]?.at;
    return oldest === undefined ? 0 : Math.max(0, this.#now() - oldest);
  }

  /** Writes submitted and not yet answered: the group being committed and those queued behind it. */
  pending(): number {
    return this.#runningOps + this.#queue.length;
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      while (this.#queue.length > 0) {
        const group = this.#queue.splice(0, this.#maxOps);
        this.#runningSince = group[0]!.at;
        this.#runningOps = group.length;
        let began = false;
        try {
          const results = await writeTransaction(this.#knex, (run) => {
            began = true;
            return this.#apply(run, group.map((p) => p.op));
          });
          group.forEach((p, i) => p.resolve(results[i]!));
        } catch (err) {
          // The store itself failed (no connection, or sqlite's write lock held past its busy timeout): every write
          // of the group gets that error now. Tried one by one, each would wait out the same failure again (a minute
          // and more for a group of sessions, while the backlog grows).
          if (group.length === 1 || !began) {
            for (const p of group) p.reject(err);
            continue;
          }
          for (const p of group) {
            try {
              p.resolve((await writeTransaction(this.#knex, (run) => this.#apply(run, [p.op])))[0]!);
            } catch (own) {
              p.reject(own);
            }
          }
        }
      }
    } finally {
      this.#running = false;
      this.#runningSince = undefined;
      this.#runningOps = 0;
    }
  }
}
