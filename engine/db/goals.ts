// Goals with progress history: at most MAX_ACTIVE_GOALS active per user, one history value per goal and UTC day.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { VersionedWrites } from '../cache/data-versions.js';
import { bool, DAY_MS, isoNow, utcDay, type Dialect } from './store.js';

export const GOAL_TYPES = ['boolean', 'scale', 'numeric'] as const;
export type GoalType = (typeof GOAL_TYPES)[number];

/** Active goals per user, the public limit; creating one more deactivates the oldest active goal. */
export const MAX_ACTIVE_GOALS = 3;

export interface NewGoal {
  title: string;
  goalType: GoalType;
  targetValue: number;
  currentValue: number;
  minValue: number;
  maxValue: number;
  unit: string | null;
}

export interface GoalRecord extends NewGoal {
  id: string;
  userId: string;
  isActive: boolean;
  endedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export type GoalPatch = Partial<Omit<NewGoal, 'goalType'>>;

export interface GoalHistoryEntry {
  /** UTC day, YYYY-MM-DD. */
  date: string;
  value: number;
  recordedAt: string;
}

interface Row {
  id: string;
  user_id: string;
  title: string;
  goal_type: string;
  target_value: number;
  current_value: number;
  min_value: number;
  max_value: number;
  unit: string | null;
  is_active: unknown;
  ended_at: string | null;
  created_at: string;
  updated_at: string;
}

const toRecord = (r: Row): GoalRecord => ({
  id: r.id,
  userId: r.user_id,
  title: r.title,
  goalType: r.goal_type as GoalType,
  targetValue: Number(r.target_value),
  currentValue: Number(r.current_value),
  minValue: Number(r.min_value),
  maxValue: Number(r.max_value),
  unit: r.unit,
  isActive: bool(r.is_active),
  endedAt: r.ended_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});


/** Every write goes through `versions`, so nodes caching answers about the user's goals hear of it. */
export class GoalsRepository {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly versions: VersionedWrites,
  ) {}

  /** Active goals, oldest first, at most `limit`. */
  async listActive(userId: string, limit: number): Promise<GoalRecord[]> {
    const rows = (await this.knex('goals')
      .where({ user_id: userId, is_active: true })
      .orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }])
      .limit(limit)) as Row[];
    return rows.map(toRecord);
  }

  /** Every goal, active or not, newest first. */
  async listAll(userId: string): Promise<GoalRecord[]> {
    const rows = (await this.knex('goals')
      .where({ user_id: userId })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])) as Row[];
    return rows.map(toRecord);
  }

  async get(userId: string, id: string): Promise<GoalRecord | undefined> {
    const row = (await this.knex('goals').where({ id, user_id: userId }).first()) as Row | undefined;
    return row ? toRecord(row) : undefined;
  }

  /**
   * Creates an active goal. When the user already has MAX_ACTIVE_GOALS active ones, the oldest are deactivated
   * (is_active false, ended_at now) in the same transaction.
   */
  async create(userId: string, goal: NewGoal, now: number): Promise<GoalRecord> {
    const at = isoNow(now);
    const row: Row = {
      id: `goal_${randomBytes(6).toString('hex')}`,
      user_id: userId,
      title: goal.title,
      goal_type: goal.goalType,
      target_value: goal.targetValue,
      current_value: goal.currentValue,
      min_value: goal.minValue,
      max_value: goal.maxValue,
      unit: goal.unit,
      is_active: true,
      ended_at: null,
      created_at: at,
      updated_at: at,
    };
    await this.versions.write(userId, () => this.#insert(row, at));
    return toRecord(row);
  }

  async #insert(row: Row, at: string): Promise<void> {
    const userId = row.user_id;
    await this.knex.transaction(async (trx) => {
      // Two concurrent creates must not both see room for one more: serialise them per user.
      // sqlite runs on one connection, so its transactions are already serial.
      if (this.dialect === 'pg') await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`goals:${userId}`]);
      const active = (await trx('goals')
        .where({ user_id: userId, is_active: true })
        .orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }])
        .select('id')) as Pick<Row, 'id'>[];
      const excess = active.length - (MAX_ACTIVE_GOALS - 1);
      if (excess > 0) {
        const oldest = active.slice(0, excess).map((r) => r.id);
        await trx('goals').whereIn('id', oldest).update({ is_active: false, ended_at: at, updated_at: at });
      }
      await trx('goals').insert(row);
    });
  }

  /** Applies the given fields (no history is written); undefined when the goal is not the user's. */
  async update(userId: string, id: string, patch: GoalPatch, now: number): Promise<GoalRecord | undefined> {
    const changes: Partial<Row> = { updated_at: isoNow(now) };
    if (patch.title !== undefined) changes.title = patch.title;
    if (patch.targetValue !== undefined) changes.target_value = patch.targetValue;
    if (patch.currentValue !== undefined) changes.current_value = patch.currentValue;
    if (patch.minValue !== undefined) changes.min_value = patch.minValue;
    if (patch.maxValue !== undefined) changes.max_value = patch.maxValue;
    if (patch.unit !== undefined) changes.unit = patch.unit;
    const n = await this.versions.write(userId, () => this.knex('goals').where({ id, user_id: userId }).update(changes));
    return n > 0 ? this.get(userId, id) : undefined;
  }

  /** Sets the current value and records it as the value of today's UTC day (a later call the same day overwrites it). */
  async setProgress(userId: string, id: string, value: number, now: number): Promise<GoalRecord | undefined> {
    const at = isoNow(now);
    const found = await this.versions.write(userId, () =>
      this.knex.transaction(async (trx) => {
        const n = await trx('goals').where({ id, user_id: userId }).update({ current_value: value, updated_at: at });
        if (n === 0) return false;
        await trx('goal_history').insert({ goal_id: id, date: utcDay(now), value, recorded_at: at }).onConflict(['goal_id', 'date']).merge(['value', 'recorded_at']);
        return true;
      }),
    );
    return found ? this.get(userId, id) : undefined;
  }

  /** History of the last `days` UTC days, today included, newest first; undefined when the goal is not the user's. */
  async history(userId: string, id: string, days: number, now: number): Promise<GoalHistoryEntry[] | undefined> {
    if (!(await this.get(userId, id))) return undefined;
    const firstDay = utcDay(now - (days - 1) * DAY_MS);
    const rows = (await this.knex('goal_history')
      .where({ goal_id: id })
      .andWhere('date', '>=', firstDay)
      .orderBy('date', 'desc')) as { date: string; value: number; recorded_at: string }[];
    return rows.map((r) => ({ date: r.date, value: Number(r.value), recordedAt: r.recorded_at }));
  }

  /** Deletes the goal and its history; false when it is not the user's. */
  async delete(userId: string, id: string): Promise<boolean> {
    return this.versions.write(userId, () =>
      this.knex.transaction(async (trx) => {
        const n = await trx('goals').where({ id, user_id: userId }).delete();
        if (n > 0) await trx('goal_history').where({ goal_id: id }).delete();
        return n > 0;
      }),
    );
  }
}
