// Developer webhook settings (one URL per user and type, enabled or not) and the user's webhook signing secret;
// signed-in ID token only. The paths and answers are the compatible system's; the secret routes are ours.
import { Type } from '@sinclair/typebox';
import { EngineError, validationError, valueError } from '../../engine/errors.js';
import { AUDIO_BYTES_SECONDS, DEVELOPER_WEBHOOK_TYPES, type DeveloperWebhook, type DeveloperWebhookType } from '../../engine/db/webhooks.js';
import { DestinationRefused } from '../../engine/webhooks/destination.js';
import { webhookParts } from '../../engine/webhooks/parts.js';
import type { WebhookSecretRecord } from '../../engine/db/webhooks.js';
import type { DestinationGuard } from '../../engine/webhooks/destination.js';
import { deliveryRoutes } from './deliveries.js';
import type { AppRoute, Services } from './types.js';

/** Longest webhook URL accepted, in characters (our bound; browsers and proxies commonly stop near 2,000). */
export const MAX_WEBHOOK_URL_CHARS = 2048;

const TYPE_TEXT = `${DEVELOPER_WEBHOOK_TYPES.slice(0, -1).map((x) => `'${x}'`).join(', ')} or '${DEVELOPER_WEBHOOK_TYPES.at(-1)}'`;

/** The path's `{type}`, or a 422 shaped as FastAPI's answer for a value outside its enum. */
export function webhookType(raw: string | undefined): DeveloperWebhookType {
  if ((DEVELOPER_WEBHOOK_TYPES as readonly string[]).includes(raw ?? '')) return raw as DeveloperWebhookType;
  throw validationError([{ loc: ['path', 'type'], msg: `Input should be ${TYPE_TEXT}`, type: 'enum', ctx: { expected: TYPE_TEXT } }]);
}

/** Checks a destination URL for saving: malformed → 422 at `loc`, refused by a rule → 400 naming the rule. */
export async function checkDestination(guard: DestinationGuard, url: string, loc: (string | number)[]): Promise<string> {
  try {
    new URL(url);
  } catch {
    throw valueError(loc, 'must be an absolute http(s) URL');
  }
  try {
    return (await guard.check(url)).url.href;
  } catch (err) {
    if (err instanceof DestinationRefused) throw new EngineError('ENG_ERR_WEBHOOK_DESTINATION_REFUSED', { reason: err.message });
    throw err;
  }
}

/** `url,seconds` (audio_bytes): the URL and the seconds of audio per request; seconds default to 5. */
export function splitAudioUrl(raw: string): { url: string; seconds: number } {
  const comma = raw.lastIndexOf(',');
  if (comma === -1) return { url: raw, seconds: AUDIO_BYTES_SECONDS.default };
  const tail = raw.slice(comma + 1).trim();
  const url = raw.slice(0, comma).trim();
  if (tail === '') return { url, seconds: AUDIO_BYTES_SECONDS.default };
  const { min, max } = AUDIO_BYTES_SECONDS;
  if (!/^\d+$/.test(tail) || Number(tail) < min || Number(tail) > max) {
    throw valueError(['body', 'url'], `the seconds after the comma must be a whole number from ${min} to ${max}`);
  }
  return { url, seconds: Number(tail) };
}

const StatusOk = Type.Object({ status: Type.Literal('ok') }, { title: 'WebhookSettingSaved', description: 'the change was stored' });

const WebhookSettingSchema = Type.Object({
  url: Type.Union([Type.String(), Type.Null()], { description: 'null when none is set; audio_bytes as `url,seconds`' }),
  enabled: Type.Boolean({ description: 'false when none is set or it is disabled' }),
  seconds: Type.Optional(Type.Integer({ description: 'audio_bytes only: seconds of audio per request' })),
}, { title: 'DeveloperWebhook', description: 'where one type of event is sent for you, and whether it is on' });

const WebhookStatusSchema = Type.Object(Object.fromEntries(DEVELOPER_WEBHOOK_TYPES.map((x) => [x, Type.Boolean()])) as Record<DeveloperWebhookType, ReturnType<typeof Type.Boolean>>, {
  description: 'per type: a URL is set and enabled',
  title: 'DeveloperWebhooksStatus',
});

export const WebhookSecretSchema = Type.Object({
  secret: Type.String({ description: 'the current Standard Webhooks secret, `whsec_` and base64' }),
  previous_secret_expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'after a rotation: until when deliveries are also signed with the previous secret',
  }),
  rotated_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
}, { title: 'WebhookSecret', description: 'the Standard Webhooks secret deliveries are signed with' });

const SetWebhookBody = Type.Object({
  url: Type.String({ maxLength: MAX_WEBHOOK_URL_CHARS + 8, description: 'http(s) URL; audio_bytes takes `url,seconds` (seconds 1-60, default 5); empty clears it' }),
}, { title: 'SetDeveloperWebhook', description: 'the URL to send one type of event to' });

function secretView(r: WebhookSecretRecord, now: number): Record<string, unknown> {
  const live = r.previousExpiresAt !== null && Date.parse(r.previousExpiresAt) > now;
  return { secret: r.secret, previous_secret_expires_at: live ? r.previousExpiresAt : null, rotated_at: r.rotatedAt };
}

/** Who a secret route's caller may read and rotate the secret of; undefined answers 404 `notFound`. */
interface SecretRoutesOptions {
  path: string;
  /** Suffix of the routes' operation ids: `get<name>`, `rotate<name>`. */
  name: string;
  /** Whose deliveries the secret signs, for the summaries. */
  whose: string;
  tags: string[];
  notFound?: string;
  owner(req: Parameters<AppRoute['handler']>[0]): Promise<{ kind: 'user' | 'app'; id: string } | undefined>;
}

/** GET a Standard Webhooks secret (created on first read) and POST `/rotate` it, for a user or an app. */
export function webhookSecretRoutes(s: Services, o: SecretRoutesOptions): AppRoute[] {
  const { secrets } = webhookParts(s);
  const missing: Record<number, { description: string }> = o.notFound ? { 404: { description: o.notFound } } : {};
  const ownerOf = async (req: Parameters<AppRoute['handler']>[0]): Promise<{ kind: 'user' | 'app'; id: string }> => {
    const owner = await o.owner(req);
    if (!owner) throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'App' });
    return owner;
  };
  return [
    {
      method: 'get',
      path: o.path,
      operationId: `get${o.name}`,
      summary: `The secret ${o.whose} are signed with (created on first read)`,
      tags: o.tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the secret', schema: WebhookSecretSchema }, ...missing },
      async handler(req) {
        const owner = await ownerOf(req);
        const now = s.clock.now();
        return { body: secretView(await secrets.get(owner.kind, owner.id, now), now) };
      },
    },
    {
      method: 'post',
      path: `${o.path}/rotate`,
      operationId: `rotate${o.name}`,
      summary: `Replace the secret ${o.whose} are signed with; the previous one keeps signing for 24 hours`,
      tags: o.tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the new secret', schema: WebhookSecretSchema }, ...missing },
      async handler(req) {
        const owner = await ownerOf(req);
        const now = s.clock.now();
        const record = await secrets.rotate(owner.kind, owner.id, now);
        s.logger.info({ ownerKind: owner.kind, appId: owner.kind === 'app' ? owner.id : undefined }, 'webhook secret rotated');
        return { body: secretView(record, now) };
      },
    },
  ];
}

function settingView(w: DeveloperWebhook | undefined): Record<string, unknown> {
  if (!w) return { url: null, enabled: false };
  if (w.type === 'audio_bytes') return { url: `${w.url},${w.seconds ?? AUDIO_BYTES_SECONDS.default}`, enabled: w.enabled, seconds: w.seconds ?? AUDIO_BYTES_SECONDS.default };
  return { url: w.url, enabled: w.enabled };
}

export function webhookRoutes(s: Services): AppRoute[] {
  const parts = webhookParts(s);
  const tags = ['Developer webhooks'];
  const toggle = (enabled: boolean): AppRoute => ({
    method: 'post',
    path: `/v1/users/developer/webhook/{type}/${enabled ? 'enable' : 'disable'}`,
    operationId: enabled ? 'enableDeveloperWebhook' : 'disableDeveloperWebhook',
    summary: enabled ? 'Enable your webhook of one type (its URL must be set)' : 'Disable your webhook of one type, keeping its URL',
    tags,
    auth: { kind: 'id_token' },
    responses: { 200: { description: 'done', schema: StatusOk }, 409: { description: 'enable: no URL is set for this type' } },
    async handler({ auth, params }) {
      const type = webhookType(params.type);
      const found = await parts.webhooks.setEnabled(auth.uid, type, enabled, s.clock.now());
      if (!found && enabled) throw new EngineError('ENG_ERR_WEBHOOK_NOT_SET', { type });
      s.logger.info({ type, enabled }, 'developer webhook toggled');
      return { body: { status: 'ok' } };
    },
  });
  return [
    {
      method: 'post',
      path: '/v1/users/developer/webhook/{type}',
      operationId: 'setDeveloperWebhook',
      summary: 'Save (and enable) your webhook URL of one type; an empty URL clears it',
      description:
        'Types: memory_created (a conversation was created), realtime_transcript, audio_bytes (`url,seconds`), day_summary. The URL must be http(s), carry no credentials, and resolve only to public addresses (400 naming the rule otherwise).',
      tags,
      auth: { kind: 'id_token' },
      body: SetWebhookBody,
      responses: { 200: { description: 'saved', schema: StatusOk }, 400: { description: 'the destination is refused; `detail` names the rule' } },
      async handler({ auth, params, body }) {
        const type = webhookType(params.type);
        const raw = (body.url as string).trim();
        if (raw === '' || raw === ',') {
          await parts.webhooks.clear(auth.uid, type);
          s.logger.info({ type }, 'developer webhook cleared');
          return { body: { status: 'ok' } };
        }
        const { url, seconds } = type === 'audio_bytes' ? splitAudioUrl(raw) : { url: raw, seconds: null };
        if (url.length > MAX_WEBHOOK_URL_CHARS) throw valueError(['body', 'url'], `the URL must be at most ${MAX_WEBHOOK_URL_CHARS} characters`);
        const checked = await checkDestination(parts.guard, url, ['body', 'url']);
        await parts.webhooks.set(auth.uid, type, checked, seconds, s.clock.now());
        s.logger.info({ type }, 'developer webhook saved');
        return { body: { status: 'ok' } };
      },
    },
    {
      method: 'get',
      path: '/v1/users/developer/webhook/{type}',
      operationId: 'getDeveloperWebhook',
      summary: 'Your webhook URL of one type and whether it is enabled',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the setting', schema: WebhookSettingSchema } },
      async handler({ auth, params }) {
        const type = webhookType(params.type);
        return { body: settingView(await parts.webhooks.get(auth.uid, type)) };
      },
    },
    toggle(true),
    toggle(false),
    {
      method: 'get',
      path: '/v1/users/developer/webhooks/status',
      operationId: 'getDeveloperWebhooksStatus',
      summary: 'For each of the four types, whether a URL is set and enabled',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'one boolean per type', schema: WebhookStatusSchema } },
      async handler({ auth }) {
        const set = new Map((await parts.webhooks.list(auth.uid)).map((w) => [w.type, w.enabled]));
        return { body: Object.fromEntries(DEVELOPER_WEBHOOK_TYPES.map((x) => [x, set.get(x) === true])) };
      },
    },
    ...webhookSecretRoutes(s, {
      path: '/v1/users/developer/webhook-secret',
      name: 'DeveloperWebhookSecret',
      whose: 'your developer webhooks',
      tags,
      owner: async ({ auth }) => ({ kind: 'user', id: auth.uid }),
    }),
    ...deliveryRoutes(s, {
      path: '/v1/users/developer/webhooks',
      name: 'DeveloperWebhook',
      whose: 'your developer webhooks',
      tags,
      owner: async ({ auth }) => ({ kind: 'user', id: auth.uid }),
    }),
  ];
}
