// The template variables of a proactive notification prompt: what each scope lets an app's prompt see of the user,
// read from the store and bounded, so one prompt can never carry a user's whole history.
import type { Knex } from 'knex';
import type { ConversationsRepository } from '../db/conversations.js';
import type { MemoriesRepository } from '../db/memories.js';
import type { UserSettingsRepository } from '../db/user-settings.js';
import type { ProactiveScope } from '../db/apps.js';

/** Memories read for `{{user_facts}}`, newest first, and the most characters they may fill. */
export const USER_FACTS_MAX = 50;
export const USER_FACTS_MAX_CHARS = 3_000;
/** Past conversations ranked for `{{user_context}}`: the newest this many, of which the best few are kept. */
export const CONTEXT_CANDIDATES = 200;
export const CONTEXT_TOP = 3;
export const USER_CONTEXT_MAX_CHARS = 3_000;
/** Messages apps sent the user, for `{{user_chat}}`, as the compatible system reads the last 10 of a chat. */
export const USER_CHAT_MESSAGES = 10;
export const USER_CHAT_MAX_CHARS = 2_000;

// BM25's usual constants: term saturation and length normalisation.
const K1 = 1.2;
const B = 0.75;

export interface ContextSources {
  knex: Knex;
  settings: UserSettingsRepository;
  memories: MemoriesRepository;
  conversations: ConversationsRepository;
}

/** Lower-case words of letters and digits in any script; words of one character carry no topic. */
export function words(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => w.length > 1);
}

/** Indexes of `docs` ranked by BM25 against `query`, best first; documents sharing no word with it are left out. */
export function bm25(query: readonly string[], docs: readonly string[][]): number[] {
  const n = docs.length;
  if (n === 0) return [];
  const avg = docs.reduce((s, d) => s + d.length, 0) / n || 1;
  const df = new Map<string, number>();
  for (const d of docs) for (const w of new Set(d)) df.set(w, (df.get(w) ?? 0) + 1);
  const terms = [...new Set(query)];
  const scored = docs.map((d, i) => {
    const tf = new Map<string, number>();
    for (const w of d) tf.set(w, (tf.get(w) ?? 0) + 1);
    let score = 0;
    for (const q of terms) {
      const f = tf.get(q);
      if (!f) continue;
      const idf = Math.log(1 + (n - df.get(q)! + 0.5) / (df.get(q)! + 0.5));
      score += (idf * f * (K1 + 1)) / (f + K1 * (1 - B + (B * d.length) / avg));
    }
    return { i, score };
  });
  return scored.filter((s) => s.score > 0).sort((a, b) => b.score - a.score || a.i - b.i).map((s) => s.i);
}

/** Lines joined until the next one would pass `max` characters. */
function bounded(lines: readonly string[], max: number): string {
  let out = '';
  for (const l of lines) {
    const next = out === '' ? l : `${out}\n${l}`;
    if (next.length > max) break;
    out = next;
  }
  return out;
}

/** The value of one scope's variable for `uid`; `segments` are the live text that triggered the prompt. */
export async function scopeValue(src: ContextSources, scope: ProactiveScope, uid: string, segments: readonly string[]): Promise<string> {
  switch (scope) {
    case 'user_name':
      return (await src.settings.get(uid)).name ?? '';
    case 'user_facts': {
      const facts = await src.memories.list(uid, { limit: USER_FACTS_MAX, offset: 0 });
      return bounded(facts.map((m) => `- ${m.content}`), USER_FACTS_MAX_CHARS);
    }
    case 'user_context': {
      const past = await src.conversations.list(uid, { limit: CONTEXT_CANDIDATES, offset: 0, includeSegments: false });
      const ranked = bm25(words(segments.join(' ')), past.map((c) => words(`${c.title} ${c.overview}`)));
      return bounded(ranked.slice(0, CONTEXT_TOP).map((i) => `- ${past[i]!.title}: ${past[i]!.overview}`), USER_CONTEXT_MAX_CHARS);
    }
    case 'user_chat': {
      const rows = (await src.knex('notifications')
        .where({ uid })
        .whereIn('source', ['app', 'proactive', 'webhook'])
        .orderBy('id', 'desc')
        .limit(USER_CHAT_MESSAGES)
        .select('title', 'body')) as { title: string; body: string }[];
      return bounded(rows.reverse().map((r) => `${r.title}: ${r.body}`), USER_CHAT_MAX_CHARS);
    }
  }
}

const VARIABLE = /\{\{\s*(user_name|user_facts|user_context|user_chat)\s*\}\}/g;

/**
 * Fills `{{scope}}` for every scope in `allowed` (asked for, declared and granted); the variables of other scopes
 * become empty, so a prompt never shows the user what its app may not see, nor a raw placeholder.
 */
export async function renderPrompt(src: ContextSources, prompt: string, allowed: ReadonlySet<ProactiveScope>, uid: string, segments: readonly string[]): Promise<string> {
  const used = new Set([...prompt.matchAll(VARIABLE)].map((m) => m[1] as ProactiveScope));
  const values = new Map<string, string>();
  for (const scope of used) if (allowed.has(scope)) values.set(scope, await scopeValue(src, scope, uid, segments));
  return prompt.replace(VARIABLE, (_m, name: string) => values.get(name) ?? '');
}
