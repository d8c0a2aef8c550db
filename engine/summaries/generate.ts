// Writing a day's summary_json from its conversations: stats, action items and locations exactly as the store holds
// them; the text fields (headline, overview, highlights, questions, decisions, nuggets) from the LLM when one is
// configured, else from the conversations' own structure and transcript.
import { randomUUID } from 'node:crypto';
import type OpenAI from 'openai';
import { Ajv } from 'ajv';
import type { ConversationRecord } from '../db/conversations.js';
import type { SummaryJson } from '../db/daily-summaries.js';
import { localTime } from './zones.js';

/** Highlights, questions, decisions and nuggets kept per list. */
export const MAX_SUMMARY_ITEMS = 5;
/** Longest built-in overview, in characters. */
export const MAX_OVERVIEW_CHARS = 600;
/** Transcript characters of one conversation sent to the LLM. */
export const LLM_TRANSCRIPT_CHARS = 2000;
/** Requests made for one summary when the answer breaks the schema: the first and one retry. */
export const SUMMARY_LLM_ATTEMPTS = 2;

export interface DayInput {
  date: string;
  zone: string;
  now: number;
  /** The day's kept conversations with transcribed speech, segments included. */
  conversations: readonly ConversationRecord[];
  /** Memories extracted from them. */
  memories: readonly { content: string; conversationId: string }[];
}

/** The parts the LLM writes; the rest comes from the store. */
export interface TextParts {
  headline: string;
  overview: string;
  day_emoji: string;
  highlights: SummaryJson['highlights'];
  unresolved_questions: SummaryJson['unresolved_questions'];
  decisions_made: SummaryJson['decisions_made'];
  knowledge_nuggets: SummaryJson['knowledge_nuggets'];
}

/** The summary could not be written (the LLM answered badly every time). */
export class DaySummaryFailedError extends Error {}

const durationMs = (c: ConversationRecord): number => {
  const start = Date.parse(c.startedAt);
  const end = c.finishedAt ? Date.parse(c.finishedAt) : start + 1000 * Math.max(0, ...(c.segments ?? []).map((s) => s.end));
  return Math.max(0, end - start);
};

const cut = (s: string, n: number): string => (s.length <= n ? s : s.slice(0, n - 3).trimEnd() + '...');

/** The fields exact from the store, around the given text parts. */
export function assemble(input: DayInput, text: TextParts): SummaryJson {
  const cs = input.conversations;
  const actionItems = cs.flatMap((c) => c.actionItems.map((a) => ({ description: a.description, priority: a.due_at ? 'high' : 'medium', completed: a.completed, source_conversation_id: c.id })));
  const locations = cs.flatMap((c) => {
    const g = c.geolocation;
    if (!g || !Number.isFinite(g.latitude) || !Number.isFinite(g.longitude)) return [];
    const t = localTime(Date.parse(c.startedAt), input.zone);
    return [{ name: g.address?.trim() || `${g.latitude}, ${g.longitude}`, latitude: g.latitude, longitude: g.longitude, time: `${String(t.hour).padStart(2, '0')}:${String(t.minute).padStart(2, '0')}` }];
  });
  return ordered({
    id: randomUUID(),
    date: input.date,
    created_at: new Date(input.now).toISOString().slice(0, -1),
    ...text,
    stats: {
      total_conversations: cs.length,
      total_duration_minutes: Math.round(cs.reduce((n, c) => n + durationMs(c), 0) / 60_000),
      action_items_count: actionItems.length,
    },
    action_items: actionItems,
    locations,
  } as SummaryJson);
}

/** SPEC's field order, so the legacy `summary` string reads like the compatible system's. */
export function ordered(s: SummaryJson): SummaryJson {
  const { id, date, created_at, headline, overview, day_emoji, stats, highlights, action_items, unresolved_questions, decisions_made, knowledge_nuggets, locations } = s;
  return { id, date, created_at, headline, overview, day_emoji, stats, highlights, action_items, unresolved_questions, decisions_made, knowledge_nuggets, locations };
}

const sentences = (c: ConversationRecord): string[] =>
  (c.segments ?? []).flatMap((s) => s.text.split(/(?<=[.!?])\s+/)).map((x) => x.trim()).filter((x) => x.length > 0);

const DECISION = /\b(decided|decide to|agreed|we will|we'll|let's|going with)\b/i;

/** The built-in text parts: the longest conversations lead; questions and decisions are the transcript's own sentences. */
export function builtinText(input: DayInput): TextParts {
  const byLength = [...input.conversations].sort((a, b) => durationMs(b) - durationMs(a));
  const lead = byLength[0];
  const firstWords = (c: ConversationRecord): string => cut(sentences(c).join(' '), 200);
  const highlights = byLength.slice(0, MAX_SUMMARY_ITEMS).map((c) => ({ topic: c.title || 'Conversation', emoji: c.emoji || '💬', summary: c.overview || firstWords(c), conversation_ids: [c.id] }));
  const pick = <T>(make: (c: ConversationRecord, s: string) => T | undefined): T[] => {
    const out: T[] = [];
    const seen = new Set<string>();
    for (const c of input.conversations) {
      for (const s of sentences(c)) {
        const v = make(c, s);
        if (v !== undefined && !seen.has(s.toLowerCase()) && out.length < MAX_SUMMARY_ITEMS) {
          seen.add(s.toLowerCase());
          out.push(v);
        }
      }
    }
    return out;
  };
  return {
    headline: lead?.title || 'Your day',
    overview: cut(highlights.map((h) => h.summary).filter((x) => x !== '').join(' '), MAX_OVERVIEW_CHARS),
    day_emoji: lead?.emoji || '📅',
    highlights,
    unresolved_questions: pick((c, s) => (s.endsWith('?') ? { question: s, conversation_id: c.id } : undefined)),
    decisions_made: pick((c, s) => (DECISION.test(s) && !s.endsWith('?') ? { decision: s, conversation_id: c.id } : undefined)),
    knowledge_nuggets: input.memories.slice(0, MAX_SUMMARY_ITEMS).map((m) => ({ insight: m.content, conversation_id: m.conversationId })),
  };
}

const str = (maxLength: number) => ({ type: 'string', minLength: 1, maxLength }) as const;
const list = (props: Record<string, unknown>) => ({
  type: 'array',
  maxItems: MAX_SUMMARY_ITEMS,
  items: { type: 'object', additionalProperties: false, required: Object.keys(props), properties: props },
}) as const;

/** What the model must answer (strict mode: every property required, no others). */
export const DAY_SUMMARY_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['headline', 'overview', 'day_emoji', 'highlights', 'unresolved_questions', 'decisions_made', 'knowledge_nuggets'],
  properties: {
    headline: str(120),
    overview: str(1000),
    day_emoji: str(16),
    highlights: list({ topic: str(120), emoji: str(16), summary: str(600), conversation_ids: { type: 'array', minItems: 1, items: { type: 'string' } } }),
    unresolved_questions: list({ question: str(300), conversation_id: { type: 'string' } }),
    decisions_made: list({ decision: str(300), conversation_id: { type: 'string' } }),
    knowledge_nuggets: list({ insight: str(300), conversation_id: { type: 'string' } }),
  },
} as const;

const validate = new Ajv({ strict: false }).compile<TextParts>(DAY_SUMMARY_SCHEMA);

/** The answer's text parts when it matches the schema and names only the day's conversations; else undefined. */
export function readTextParts(value: unknown, ids: ReadonlySet<string>): TextParts | undefined {
  if (!validate(value)) return undefined;
  const known = (id: string): boolean => ids.has(id);
  if (value.highlights.some((h) => !h.conversation_ids.every(known))) return undefined;
  if ([...value.unresolved_questions, ...value.decisions_made, ...value.knowledge_nuggets].some((x) => !known(x.conversation_id))) return undefined;
  return value;
}

function prompt(input: DayInput): string {
  return input.conversations
    .map((c) => {
      const t = localTime(Date.parse(c.startedAt), input.zone);
      const transcript = cut((c.segments ?? []).map((s) => `${s.isUser ? 'User' : `Speaker ${s.speakerId ?? 0}`}: ${s.text}`).join('\n'), LLM_TRANSCRIPT_CHARS);
      return `## conversation_id: ${c.id}\nstarted: ${String(t.hour).padStart(2, '0')}:${String(t.minute).padStart(2, '0')}\ntitle: ${c.title}\noverview: ${c.overview}\ntranscript:\n${transcript}`;
    })
    .join('\n\n');
}

const SYSTEM = [
  'You write the end-of-day summary of a wearable\'s owner (the user) from the day\'s conversations. Answer in JSON only, following the schema.',
  'headline: a few words naming the day. overview: two or three sentences. day_emoji: one emoji.',
  `highlights: at most ${MAX_SUMMARY_ITEMS} topics, each with the ids of the conversations it comes from.`,
  'unresolved_questions, decisions_made, knowledge_nuggets: only what the conversations say, each with its conversation_id; empty lists when there is none.',
  'Use only conversation ids given in the input.',
].join('\n');

/** The LLM's text parts: one request, and one more when the answer breaks the schema; then DaySummaryFailedError. */
export async function llmText(client: OpenAI, model: string, input: DayInput): Promise<TextParts> {
  const ids = new Set(input.conversations.map((c) => c.id));
  const user = prompt(input);
  for (let attempt = 1; attempt <= SUMMARY_LLM_ATTEMPTS; attempt++) {
    let content: string | null | undefined;
    try {
      const completion = await client.chat.completions.create({
        model,
        messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: user }],
        response_format: { type: 'json_schema', json_schema: { name: 'day_summary', strict: true, schema: DAY_SUMMARY_SCHEMA as unknown as Record<string, unknown> } },
        temperature: 0,
      });
      content = completion.choices?.[0]?.message?.content;
    } catch {
      // The client already retried timeouts, 429 and 5xx.
      throw new DaySummaryFailedError('llm request failed');
    }
    let parsed: unknown;
    try {
      parsed = typeof content === 'string' ? JSON.parse(content) : undefined;
    } catch {
      parsed = undefined;
    }
    const parts = readTextParts(parsed, ids);
    if (parts) return parts;
  }
  throw new DaySummaryFailedError('llm answer did not match the schema');
}
