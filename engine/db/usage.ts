// Speech-to-text usage per user, UTC day and provider: an atomic add, and one user's rows over a range of days.
import type { Knex } from 'knex';
import { runInserts, writeTransaction } from './prepared.js';

/** An amount to add to one (uid, day, provider) row. */
export interface UsageIncrement {
  uid: string;
  /** UTC day, YYYY-MM-DD. */
  day: string;
  provider: string;
  audioSeconds: number;
  words: number;
}

export interface UsageRow {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  provider: string;
  audioSeconds: number;
  words: number;
}

interface Row {
  uid: string;
  day: string;
  provider: string;
  audio_seconds: number | string;
  words: number | string;
}

/** Adds to the rows that exist (the same clause on sqlite and PostgreSQL). */
const ADD_ON_CONFLICT =
  'ON CONFLICT (uid, day, provider) DO UPDATE SET audio_seconds = stt_usage.audio_seconds + excluded.audio_seconds, words = stt_usage.words + excluded.words';

const keyOf = (i: UsageIncrement): string => `${i.uid}\u0000${i.day}\u0000${i.provider}`;

export class UsageRepository {
  constructor(private readonly knex: Knex) {}

  /**
   * Adds every increment to its row, creating rows as needed, in one transaction: either all of it counts or none.
   * Increments for the same row are summed first (one statement may not touch a row twice on PostgreSQL).
   */
  async add(increments: readonly UsageIncrement[]): Promise<void> {
    const merged = new Map<string, Row>();
    for (const i of increments) {
      const k = keyOf(i);
      const row = merged.get(k);
      if (row) {
        row.audio_seconds = Number(row.audio_seconds) + i.audioSeconds;
        row.words = Number(row.words) + i.words;
      } else {
        merged.set(k, { uid: i.uid, day: i.day, provider: i.provider, audio_seconds: i.audioSeconds, words: i.words });
      }
    }
    const rows = [...merged.values()];
    if (rows.length === 0) return;
    // A prepared upsert instead of a knex transaction: usage is written at nearly every session end, and each knex
    // transaction's fresh knex instance would reach the old generation and fragment the main thread's heap.
    await writeTransaction(this.knex, async (run) => {
      const values = rows.map((r) => [r.uid, r.day, r.provider, Number(r.audio_seconds), Number(r.words)]);
      await runInserts(run, 'stt_usage', ['uid', 'day', 'provider', 'audio_seconds', 'words'], values, ADD_ON_CONFLICT);
    });
  }

  /** The user's rows with `fromDay` ≤ day ≤ `toDay` (YYYY-MM-DD), by day then provider. */
  async list(uid: string, fromDay: string, toDay: string): Promise<UsageRow[]> {
    const rows = (await this.knex('stt_usage')
      .where('uid', uid)
      .andWhere('day', '>=', fromDay)
      .andWhere('day', '<=', toDay)
      .orderBy([{ column: 'day' }, { column: 'provider' }])) as Row[];
    // PostgreSQL may return numeric columns as strings.
    return rows.map((r) => ({ day: r.day, provider: r.provider, audioSeconds: Number(r.audio_seconds), words: Number(r.words) }));
  }
}
