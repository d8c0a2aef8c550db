// A user's settings (display name, time zone, language, day summary) and their push tokens, one per device.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { bool, isoNow } from './store.js';

export interface UserSettings {
  name: string | null;
  timeZone: string | null;
  language: string | null;
  dailySummaryEnabled: boolean;
  /** Local hour (0-23) the day summary is delivered at. */
  dailySummaryHour: number;
}

/** What a user who never saved settings has. */
export const DEFAULT_SETTINGS: Readonly<UserSettings> = { name: null, timeZone: null, language: null, dailySummaryEnabled: true, dailySummaryHour: 22 };

interface SettingsRow {
  uid: string;
  name: string | null;
  time_zone: string | null;
  language: string | null;
  daily_summary_enabled: unknown;
  daily_summary_hour: number;
  updated_at: string;
}

export interface PushToken {
  id: string;
  uid: string;
  token: string;
  timeZone: string | null;
}

const COLUMNS: Record<keyof UserSettings, keyof SettingsRow> = {
  name: 'name',
  timeZone: 'time_zone',
  language: 'language',
  dailySummaryEnabled: 'daily_summary_enabled',
  dailySummaryHour: 'daily_summary_hour',
};

export class UserSettingsRepository {
  constructor(private readonly knex: Knex) {}

  async get(uid: string): Promise<UserSettings> {
    const r = (await this.knex('user_settings').where({ uid }).first()) as SettingsRow | undefined;
    if (!r) return { ...DEFAULT_SETTINGS };
    return { name: r.name, timeZone: r.time_zone, language: r.language, dailySummaryEnabled: bool(r.daily_summary_enabled), dailySummaryHour: Number(r.daily_summary_hour) };
  }

  /** Saves the given fields (the others keep their value or default) and answers the whole settings. */
  async update(uid: string, fields: Partial<UserSettings>, now: number): Promise<UserSettings> {
    const changed: Record<string, unknown> = { updated_at: isoNow(now) };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) changed[COLUMNS[k as keyof UserSettings]] = v;
    const d = DEFAULT_SETTINGS;
    const row = { uid, name: d.name, time_zone: d.timeZone, language: d.language, daily_summary_enabled: d.dailySummaryEnabled, daily_summary_hour: d.dailySummaryHour, ...changed };
    await this.knex('user_settings').insert(row).onConflict('uid').merge(Object.keys(changed));
    return this.get(uid);
  }

  /** Registers a device's token for `uid` (a token moved to another account follows it); answers its id. */
  async saveToken(uid: string, token: string, timeZone: string | null, now: number): Promise<PushToken> {
    const at = isoNow(now);
    await this.knex('push_tokens')
      .insert({ id: randomUUID(), uid, token, time_zone: timeZone, created_at: at, updated_at: at })
      .onConflict('token')
      .merge({ uid, time_zone: timeZone, updated_at: at });
    const r = (await this.knex('push_tokens').where({ token }).first()) as { id: string; uid: string; token: string; time_zone: string | null };
    return { id: r.id, uid: r.uid, token: r.token, timeZone: r.time_zone };
  }

  /** false when `uid` had no such token. */
  async deleteToken(uid: string, token: string): Promise<boolean> {
    return (await this.knex('push_tokens').where({ uid, token }).delete()) > 0;
  }

  /** Removes a token the push service refused for good. */
  async deleteTokenById(id: string): Promise<void> {
    await this.knex('push_tokens').where({ id }).delete();
  }

  async tokens(uid: string): Promise<PushToken[]> {
    const rows = (await this.knex('push_tokens').where({ uid }).orderBy('created_at')) as { id: string; uid: string; token: string; time_zone: string | null }[];
    return rows.map((r) => ({ id: r.id, uid: r.uid, token: r.token, timeZone: r.time_zone }));
  }

  async token(id: string): Promise<PushToken | undefined> {
    const r = (await this.knex('push_tokens').where({ id }).first()) as { id: string; uid: string; token: string; time_zone: string | null } | undefined;
    return r ? { id: r.id, uid: r.uid, token: r.token, timeZone: r.time_zone } : undefined;
  }
}
