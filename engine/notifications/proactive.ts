// Proactive notifications and pushed replies: what a realtime transcript endpoint's answer asks the user to be told.
// A `notification` request has its prompt filled with what the app may see, written by the LLM (or rendered as it
// stands offline) and pushed; a plain `message` is pushed as it is. Every one is recorded with its outcome.
import { LazyOpenAI } from '../openai-client.js';
import type { Knex } from 'knex';
import type { RedisClient } from '../redis.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { AppReply } from '../db/app-replies.js';
import { PROACTIVE_SCOPES, type AppsRepository, type ProactiveScope } from '../db/apps.js';
import type { DeliveriesRepository } from '../db/deliveries.js';
import { isoNow } from '../db/store.js';
import type { LiveSegment } from '../webhooks/types.js';
import type { Notifier } from './notifier.js';
import { renderPrompt, type ContextSources } from './context.js';

/** One notification per user per app (or per developer webhook) in this window, as the compatible system allows. */
export const PROACTIVE_INTERVAL_MS = 30_000;
/** A notification not ready this long after the reply that asked for it is dropped: the moment has passed. */
export const PROACTIVE_DEADLINE_MS = 30_000;
/** Text under this many characters (after trimming) is no notification. */
export const PROACTIVE_MIN_CHARS = 5;
/** A filled prompt longer than this is refused and its app's owner told. */
export const MAX_PROMPT_CHARS = 8_000;
/** What the LLM is asked to stay within, and where any longer text is cut (with "..."). */
export const PROACTIVE_TARGET_CHARS = 100;
export const PROACTIVE_MAX_CHARS = 150;
/** A pushed reply `message` is cut here, the direct notification's bound. */
export const REPLY_MESSAGE_MAX_CHARS = 2_000;

export type ProactiveOutcome = 'sent' | 'rate_limited' | 'too_short' | 'too_long' | 'not_allowed' | 'failed' | 'late';

/** The answer the model must give: the notification's text, empty when nothing is worth saying. */
const ANSWER_SCHEMA = { type: 'object', additionalProperties: false, required: ['notification'], properties: { notification: { type: 'string' } } } as const;

const SYSTEM_PROMPT = [
  "You write one push notification for the user of a wearable, following an app's instructions below.",
  `Answer in JSON only: {"notification": text}. The text is at most ${PROACTIVE_TARGET_CHARS} characters, plain, addressed to the user;`,
  'an empty string when the instructions find nothing worth telling the user.',
].join(' ');

/** Takes the user's slot for the app when the last one was taken at least the interval ago (clock time in the value). */
const TAKE = `
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= 0 and tonumber(ARGV[1]) - last < tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`;

type Counting = RedisClient & { proactiveTake(key: string, now: number, intervalMs: number, ttlMs: number): Promise<number> };

/** Text cut to `max` characters, the cut marked with "...". */
export function cut(text: string, max: number): string {
  const chars = [...text];
  return chars.length <= max ? text : `${chars.slice(0, max - 3).join('').trimEnd()}...`;
}

export interface ProactiveOptions {
  config: Pick<Config, 'redisPrefix' | 'llmBaseUrl' | 'llmApiKey' | 'llmModel' | 'llmTimeoutMs'>;
  knex: Knex;
  redis: RedisClient;
  clock: Clock;
  logger: Logger;
  apps: AppsRepository;
  deliveries: DeliveriesRepository;
  notifier: Notifier;
  sources: Omit<ContextSources, 'knex'>;
}

export class ProactiveNotifications {
  readonly #o: ProactiveOptions;
  readonly #redis: Counting;
  readonly #llm: LazyOpenAI | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  constructor(o: ProactiveOptions) {
    this.#o = o;
    if (!('proactiveTake' in o.redis)) o.redis.defineCommand('proactiveTake', { numberOfKeys: 1, lua: TAKE });
    this.#redis = o.redis as Counting;
    const { llmBaseUrl, llmApiKey, llmTimeoutMs } = o.config;
    // One try, bounded well inside the deadline: a retry would land after the moment the notification was for.
    this.#llm = llmBaseUrl ? new LazyOpenAI({ baseURL: llmBaseUrl, apiKey: llmApiKey ?? 'unused', timeout: Math.min(llmTimeoutMs, PROACTIVE_DEADLINE_MS - 5_000), maxRetries: 0 }) : undefined;
  }

  /** The live transcript seam: acts on one stored reply in the background. */
  readonly handle = (reply: AppReply, segments: readonly LiveSegment[]): void => {
    const p = this.#act(reply, segments).catch((err: unknown) => {
      this.#o.logger.error({ replyId: reply.id, appId: reply.appId, err: { name: (err as Error)?.name } }, 'proactive notification failed');
    });
    this.#inFlight.add(p);
    void p.finally(() => this.#inFlight.delete(p));
  };

  /** Waits for the replies being acted on. */
  async close(): Promise<void> {
    await Promise.all([...this.#inFlight]);
  }

  async #act(reply: AppReply, segments: readonly LiveSegment[]): Promise<void> {
    const { apps, notifier } = this.#o;
    const app = reply.appId === null ? undefined : await apps.get(reply.appId);
    const install = app ? await apps.installation(app.id, reply.uid) : undefined;
    if (reply.appId !== null && (!app || !install)) return this.#record(reply, 'not_allowed');

    if (reply.kind === 'message') {
      const text = String(reply.reply.message).trim();
      if (!(await this.#take(reply))) return this.#record(reply, 'rate_limited');
      const n = await notifier.notify(reply.uid, {
        title: app ? `${app.name} says` : 'Webhook says',
        body: cut(text, REPLY_MESSAGE_MAX_CHARS),
        data: app ? { notification_type: 'plugin', navigate_to: `/chat/${app.id}`, app_id: app.id } : { notification_type: 'webhook' },
        source: 'webhook',
        appId: app?.id ?? null,
      });
      return this.#record(reply, 'sent', n.id);
    }

    if (!app || !install || !app.capabilities.includes('proactive_notification')) return this.#record(reply, 'not_allowed');
    const request = reply.reply.notification as { prompt: string; params?: unknown };
    const params = new Set(Array.isArray(request.params) ? request.params.filter((p): p is string => typeof p === 'string') : []);
    const allowed = new Set(PROACTIVE_SCOPES.filter((s) => params.has(s) && app.proactiveScopes.includes(s) && install.scopes.includes(s))) as Set<ProactiveScope>;
    // The window first: an app answering every segment costs one store read and ranking per 30 s, not per segment.
    if (!(await this.#take(reply))) return this.#record(reply, 'rate_limited');
    const prompt = await renderPrompt({ ...this.#o.sources, knex: this.#o.knex }, request.prompt, allowed, reply.uid, segments.map((s) => s.text));
    if (prompt.length > MAX_PROMPT_CHARS) {
      // The slot stays taken, so the owner hears of it at most once per window.
      await this.#tellOwner(app.ownerUid, app.id, app.name, prompt.length);
      return this.#record(reply, 'too_long');
    }
    let text: string | undefined;
    try {
      text = await this.#write(prompt);
    } catch (err) {
      this.#o.logger.warn({ replyId: reply.id, appId: app.id, err: { name: (err as Error)?.name } }, 'proactive notification not written');
    }
    const outcome: ProactiveOutcome | undefined =
      text === undefined ? 'failed' : text.length < PROACTIVE_MIN_CHARS ? 'too_short' : this.#o.clock.now() - Date.parse(reply.receivedAt) > PROACTIVE_DEADLINE_MS ? 'late' : undefined;
    if (outcome !== undefined) {
      // Nothing reached the user: the app may try again with the next segments.
      await this.#release(reply);
      return this.#record(reply, outcome);
    }
    const n = await notifier.notify(reply.uid, {
      title: app.name,
      body: cut(text!, PROACTIVE_MAX_CHARS),
      data: { notification_type: 'plugin', navigate_to: `/chat/${app.id}`, app_id: app.id },
      source: 'proactive',
      appId: app.id,
    });
    return this.#record(reply, 'sent', n.id);
  }

  /** The notification's text: the LLM's answer, or offline the filled prompt itself, whitespace collapsed. */
  async #write(prompt: string): Promise<string> {
    if (!this.#llm) return prompt.replace(/\s+/g, ' ').trim();
    const completion = await (await this.#llm.client()).chat.completions.create({
      model: this.#o.config.llmModel,
      messages: [
        { role: 'system', content: SYSTEM_PROMPT },
        { role: 'user', content: prompt },
      ],
      response_format: { type: 'json_schema', json_schema: { name: 'proactive_notification', strict: true, schema: ANSWER_SCHEMA as unknown as Record<string, unknown> } },
      temperature: 0,
    });
    const answer = JSON.parse(completion.choices[0]?.message.content ?? '') as { notification?: unknown };
    if (typeof answer?.notification !== 'string') throw new TypeError('answer without a notification');
    return answer.notification.trim();
  }

  #key(reply: AppReply): string {
    return `${this.#o.config.redisPrefix}:notify:proactive:${reply.appId ?? 'webhook'}:${reply.uid}`;
  }

  async #take(reply: AppReply): Promise<boolean> {
    return (await this.#redis.proactiveTake(this.#key(reply), this.#o.clock.now(), PROACTIVE_INTERVAL_MS, PROACTIVE_INTERVAL_MS + 60_000)) === 1;
  }

  async #release(reply: AppReply): Promise<void> {
    await this.#redis.del(this.#key(reply));
  }

  /** The owner learns their app's prompt was refused: a note kept for them and a notification. */
  async #tellOwner(ownerUid: string, appId: string, appName: string, chars: number): Promise<void> {
    const now = this.#o.clock.now();
    await this.#o.deliveries.notify(ownerUid, 'proactive_prompt_too_long', appId, { chars, limit: MAX_PROMPT_CHARS }, now);
    await this.#o.notifier.notify(ownerUid, {
      title: `${appName}: prompt too long`,
      body: `A proactive notification prompt of ${chars} characters was refused; the limit is ${MAX_PROMPT_CHARS} once its variables are filled.`,
      data: { notification_type: 'app_notice', app_id: appId },
      source: 'system',
      appId,
    });
  }

  async #record(reply: AppReply, outcome: ProactiveOutcome, notificationId: number | null = null): Promise<void> {
    await this.#o.knex('proactive_notifications').insert({
      uid: reply.uid,
      app_id: reply.appId,
      reply_id: reply.id,
      session_id: reply.sessionId,
      trigger: reply.kind,
      outcome,
      notification_id: notificationId,
      created_at: isoNow(this.#o.clock.now()),
    });
    this.#o.logger.debug({ replyId: reply.id, appId: reply.appId, outcome, notificationId }, 'proactive notification handled');
  }
}
