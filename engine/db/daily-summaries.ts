// Day summaries as generated (the summary_json payload), and the reads the day summary run makes of settings,
// conversations and memories.
import type { Knex } from 'knex';
import { ConversationStatus } from '../protocol.js';
import { bool } from './store.js';

/** The day summary payload, field for field as SPEC lists it. */
export interface SummaryJson {
  id: string;
  /** YYYY-MM-DD, the user's local calendar day. */
  date: string;
  /** Naive ISO 8601 in UTC, without offset. */
  created_at: string;
  headline: string;
  overview: string;
  day_emoji: string;
  stats: { total_conversations: number; total_duration_minutes: number; action_items_count: number };
  highlights: { topic: string; emoji: string; summary: string; conversation_ids: string[] }[];
  action_items: { description: string; priority: string; completed: boolean; source_conversation_id: string }[];
  unresolved_questions: { question: string; conversation_id: string }[];
  decisions_made: { decision: string; conversation_id: string }[];
  knowledge_nuggets: { insight: string; conversation_id: string }[];
  locations: { name: string; latitude: number; longitude: number; time: string }[];
}

/** `schedule`: made by the hourly run (the one the webhook sends); `request`: asked for by the user. */
export type SummaryTrigger = 'schedule' | 'request';

export interface DayConversation {
  id: string;
  discarded: boolean;
}

export class DailySummariesRepository {
  constructor(private readonly knex: Knex) {}

  async add(uid: string, trigger: SummaryTrigger, s: SummaryJson): Promise<void> {
    await this.knex('daily_summaries').insert({ id: s.id, uid, date: s.date, trigger, created_at: s.created_at, summary_json: JSON.stringify(s) });
  }

  async get(uid: string, id: string): Promise<SummaryJson | undefined> {
    const r = (await this.knex('daily_summaries').where({ uid, id }).first('summary_json')) as { summary_json: string } | undefined;
    return r ? (JSON.parse(r.summary_json) as SummaryJson) : undefined;
  }

  /** The user's summaries, newest first. */
  async list(uid: string, limit: number, offset: number): Promise<SummaryJson[]> {
    const rows = (await this.knex('daily_summaries').where({ uid }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit).offset(offset).select('summary_json')) as { summary_json: string }[];
    return rows.map((r) => JSON.parse(r.summary_json) as SummaryJson);
  }

  /** The latest scheduled summary of `date`: what the day_summary webhook sends. */
  async scheduled(uid: string, date: string): Promise<SummaryJson | undefined> {
    const r = (await this.knex('daily_summaries').where({ uid, date, trigger: 'schedule' }).orderBy('created_at', 'desc').first('summary_json')) as { summary_json: string } | undefined;
    return r ? (JSON.parse(r.summary_json) as SummaryJson) : undefined;
  }

  /** The time zones of users who want a day summary. */
  async zones(): Promise<string[]> {
    const rows = (await this.knex('user_settings').distinct('time_zone').whereNotNull('time_zone').andWhere({ daily_summary_enabled: true })) as { time_zone: string }[];
    return rows.map((r) => r.time_zone);
  }

  /** Users in `zone` who want their day summary at local `hour`. */
  async usersAt(zone: string, hour: number): Promise<string[]> {
    const rows = (await this.knex('user_settings').where({ time_zone: zone, daily_summary_hour: hour, daily_summary_enabled: true }).select('uid')) as { uid: string }[];
    return rows.map((r) => r.uid);
  }

  /** The user's completed, not deleted conversations started in [fromIso, toIso), kept or discarded. */
  async dayConversations(uid: string, fromIso: string, toIso: string): Promise<DayConversation[]> {
    const rows = (await this.knex('conversations')
      .where({ user_id: uid, status: ConversationStatus.COMPLETED, deleted: false })
      .andWhere('started_at', '>=', fromIso)
      .andWhere('started_at', '<', toIso)
      .select('id', 'discarded')) as { id: string; discarded: unknown }[];
    return rows.map((r) => ({ id: r.id, discarded: bool(r.discarded) }));
  }

  /** Of `ids`, those with at least one transcript segment that holds words. */
  async withSpeech(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = (await this.knex('conversation_segments').whereIn('conversation_id', [...ids]).andWhereRaw("trim(text) <> ''").distinct('conversation_id')) as { conversation_id: string }[];
    return new Set(rows.map((r) => r.conversation_id));
  }

  /** The memories extracted from `ids`, oldest first, at most `limit`. */
  async memoriesOf(uid: string, ids: readonly string[], limit: number): Promise<{ content: string; conversationId: string }[]> {
    if (ids.length === 0) return [];
    const rows = (await this.knex('memories').where({ user_id: uid }).whereIn('conversation_id', [...ids]).orderBy('created_at').limit(limit).select('content', 'conversation_id')) as { content: string; conversation_id: string }[];
    return rows.map((r) => ({ content: r.content, conversationId: r.conversation_id }));
  }
}
