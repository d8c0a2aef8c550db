// The day summary of one user and date: SPEC's skip rules, the per-user-and-date lock, generation, storage, the push
// and the day_summary webhook; and the webhook's body, built at its first attempt from the stored summary.
import { LazyOpenAI } from '../openai-client.js';
import client from 'prom-client';
import type { Services } from '../services.js';
import { DailySummariesRepository, type SummaryJson, type SummaryTrigger } from '../db/daily-summaries.js';
import { webhookParts } from '../webhooks/parts.js';
import { assemble, builtinText, DaySummaryFailedError, llmText, type DayInput } from './generate.js';
import { PyFloat, pyRepr, type PyValue } from './python-repr.js';
import { localDay, localTime, summaryDate } from './zones.js';

/** How long the lock of one user and date holds off another delivery (SPEC: 2 hours). */
export const DAY_SUMMARY_LOCK_MS = 2 * 3600 * 1000;
/** Conversations of one day a summary reads at most. */
export const MAX_DAY_CONVERSATIONS = 200;
/** Characters of the overview a push carries: 147 and "..." beyond. */
export const PUSH_BODY_CHARS = 150;

/** What the delivery of one user and date did; every value but `delivered` and `failed` is a SPEC skip rule. */
export type DayOutcome = 'delivered' | 'no_push_token' | 'no_conversations' | 'nothing_transcribed' | 'locked' | 'failed';

/** The day's kept conversations with transcribed speech; a skip outcome when there are none. */
type DayConversations = { ok: true; input: DayInput } | { ok: false; outcome: 'no_conversations' | 'nothing_transcribed' };

export const pushBody = (overview: string): string => (overview.length <= PUSH_BODY_CHARS ? overview : overview.slice(0, PUSH_BODY_CHARS - 3) + '...');

/** The day_summary webhook body: `summary` is summary_json as Python's str() renders it (coordinates are floats). */
export function daySummaryBody(uid: string, s: SummaryJson, now: number): Record<string, unknown> {
  const py = { ...s, locations: s.locations.map((l) => ({ ...l, latitude: new PyFloat(l.latitude), longitude: new PyFloat(l.longitude) })) };
  return { uid, created_at: new Date(now).toISOString().replace('Z', '+00:00'), summary_json: s, summary: pyRepr(py as unknown as PyValue) };
}

export class DaySummaries {
  readonly repo: DailySummariesRepository;
  readonly #s: Services;
  readonly #llm: LazyOpenAI | undefined;
  readonly #outcomes: client.Counter<'outcome'>;

  constructor(s: Services) {
    this.#s = s;
    this.repo = new DailySummariesRepository(s.store.knex);
    const c = s.config;
    this.#llm = c.llmBaseUrl ? new LazyOpenAI({ baseURL: c.llmBaseUrl, apiKey: c.llmApiKey ?? 'unused', timeout: c.llmTimeoutMs, maxRetries: c.llmMaxRetries }) : undefined;
    this.#outcomes = new client.Counter({ name: 'day_summaries_total', help: 'Day summary deliveries by outcome', labelNames: ['outcome'] as const, registers: [s.registry] });
    webhookParts(s).bodies.register('day_summary', async (d) => {
      const summary = await this.repo.scheduled(d.uid, d.subjectId);
      return summary ? { body: JSON.stringify(daySummaryBody(d.uid, summary, s.clock.now())), query: { uid: d.uid } } : undefined;
    });
  }

  /** The users due at UTC hour `hourMs` (local hour equal to their setting) and the date each one's summary covers. */
  async due(hourMs: number): Promise<{ uid: string; date: string }[]> {
    const out: { uid: string; date: string }[] = [];
    for (const zone of await this.repo.zones()) {
      let hour: number;
      try {
        hour = localTime(hourMs, zone).hour;
      } catch {
        continue; // a zone this runtime no longer knows
      }
      const date = summaryDate(hourMs, zone);
      for (const uid of await this.repo.usersAt(zone, hour)) out.push({ uid, date });
    }
    return out;
  }

  /** The scheduled delivery of `uid`'s summary of `date`, SPEC's rules in order; the lock is taken before any generation. */
  async deliver(uid: string, date: string): Promise<DayOutcome> {
    const outcome = await this.#deliver(uid, date);
    this.#outcomes.inc({ outcome });
    return outcome;
  }

  async #deliver(uid: string, date: string): Promise<DayOutcome> {
    const { redis, config, userSettings, webhookQueue, logger } = this.#s;
    if ((await userSettings.tokens(uid)).length === 0) return 'no_push_token';
    const day = await this.#day(uid, date);
    if (!day.ok) return day.outcome;
    const lock = `${config.redisPrefix}:users:${uid}:daily_summary_lock:${date}`;
    if ((await redis.set(lock, '1', 'PX', DAY_SUMMARY_LOCK_MS, 'NX')) !== 'OK') return 'locked';
    let summary: SummaryJson;
    try {
      summary = await this.#generate(day.input);
    } catch (err) {
      // Released so that a later run may try again; the failure is logged and counted.
      await redis.del(lock);
      if (!(err instanceof DaySummaryFailedError)) throw err;
      logger.error({ uid, date, reason: err.message }, 'day summary not generated');
      return 'failed';
    }
    await this.#store(uid, 'schedule', summary);
    await webhookQueue.enqueueDaySummary(uid, date);
    return 'delivered';
  }

  /**
   * A summary the user asks for: no lock and no webhook, only the push. Answers the summary, or why there is none
   * (`no_push_token` is checked first, as SPEC's 400 wants).
   */
  async onDemand(uid: string): Promise<SummaryJson | 'no_push_token' | 'no_conversations' | 'nothing_transcribed'> {
    if ((await this.#s.userSettings.tokens(uid)).length === 0) return 'no_push_token';
    const zone = (await this.#s.userSettings.get(uid)).timeZone ?? 'UTC';
    const day = await this.#day(uid, summaryDate(this.#s.clock.now(), zone));
    if (!day.ok) return day.outcome;
    const summary = await this.#generate(day.input);
    await this.#store(uid, 'request', summary);
    return summary;
  }

  async #day(uid: string, date: string): Promise<DayConversations> {
    const zone = (await this.#s.userSettings.get(uid)).timeZone ?? 'UTC';
    const [from, to] = localDay(date, zone);
    const all = await this.repo.dayConversations(uid, new Date(from).toISOString(), new Date(to).toISOString());
    if (all.length === 0) return { ok: false, outcome: 'no_conversations' };
    // This service has no locked conversations: a discarded one is what the compatible system's lock keeps out.
    const spoken = await this.repo.withSpeech(all.filter((c) => !c.discarded).map((c) => c.id));
    if (spoken.size === 0) return { ok: false, outcome: 'nothing_transcribed' };
    const kept = await this.#s.conversations.list(uid, { startDate: new Date(from).toISOString(), endDate: new Date(to - 1).toISOString(), limit: MAX_DAY_CONVERSATIONS, offset: 0, includeSegments: true });
    const conversations = kept.filter((c) => spoken.has(c.id)).reverse();
    const memories = await this.repo.memoriesOf(uid, conversations.map((c) => c.id), 50);
    return { ok: true, input: { date, zone, now: this.#s.clock.now(), conversations, memories } };
  }

  async #generate(input: DayInput): Promise<SummaryJson> {
    const text = this.#llm ? await llmText(await this.#llm.client(), this.#s.config.llmModel, input) : builtinText(input);
    return assemble(input, text);
  }

  /** Stores the summary and pushes it: `"<day_emoji> <headline>"`, the overview cut to 150 characters. */
  async #store(uid: string, trigger: SummaryTrigger, s: SummaryJson): Promise<void> {
    await this.repo.add(uid, trigger, s);
    await this.#s.notifier.notify(uid, {
      title: `${s.day_emoji} ${s.headline}`,
      body: pushBody(s.overview),
      data: { type: 'day_summary', summary_id: s.id, date: s.date, navigate_to: `/daily-summary/${s.id}` },
      source: 'day_summary',
    });
  }
}

const built = new WeakMap<Services, DaySummaries>();

/** The node's day summaries, built on first use (its webhook body builder registered then). */
export function daySummaries(s: Services): DaySummaries {
  let d = built.get(s);
  if (!d) built.set(s, (d = new DaySummaries(s)));
  return d;
}
