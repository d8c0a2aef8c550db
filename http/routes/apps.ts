// Apps: a signed-in developer creates, lists, updates and deletes them; users install and uninstall them. The app
// secret is shown once (at creation and at each rotation) and stored hashed; the app's webhook secret is readable by
// its owner. Every URL an app declares is checked like a developer webhook's.
import { Type, type TSchema } from '@sinclair/typebox';
import { EngineError, valueError } from '../../engine/errors.js';
import { generateKey } from '../../engine/identity/key-format.js';
import {
  APP_CAPABILITIES,
  APP_TRIGGERS,
  PROACTIVE_SCOPES,
  type AppCapability,
  type AppFields,
  type AppRecord,
  type AppTrigger,
  type ProactiveScope,
} from '../../engine/db/apps.js';
import { DestinationRefused, guardedRequest, parseDestination } from '../../engine/webhooks/destination.js';
import { webhookParts } from '../../engine/webhooks/parts.js';
import { notFound } from './common.js';
import { checkDestination, MAX_WEBHOOK_URL_CHARS, webhookSecretRoutes } from './webhooks.js';
import { deliveryRoutes } from './deliveries.js';
import type { AppRoute, Services } from './types.js';

/** Bounds of an app's text fields, in characters (ours; the compatible system names none). */
export const APP_LIMITS = { name: 200, description: 10_000, setupInstructions: 10_000 } as const;

/** How long an install waits for the app's Setup Completed URL, in milliseconds. */
export const SETUP_CHECK_TIMEOUT_MS = 5_000;

const literals = <T extends string>(values: readonly T[]): TSchema => Type.Union(values.map((v) => Type.Literal(v)));
const nullable = (schema: TSchema): TSchema => Type.Union([schema, Type.Null()]);
const UrlField = (description: string): TSchema => Type.Optional(nullable(Type.String({ maxLength: MAX_WEBHOOK_URL_CHARS, description })));

const ExternalIntegrationInput = Type.Object({
  triggers_on: Type.Optional(nullable(literals(APP_TRIGGERS))),
  webhook_url: UrlField('POST endpoint the app\'s trigger fires at; required with the capability'),
  setup_completed_url: UrlField('GET endpoint answering `{"is_setup_completed": bool}` for `?uid=`; checked before each install'),
  auth_url: UrlField('page a user opens to connect their account; `uid` is appended when shown to a user'),
  setup_instructions: Type.Optional(nullable(Type.String({ maxLength: APP_LIMITS.setupInstructions, description: 'text, or a link (`uid` appended when shown to a user)' }))),
});

const ProactiveInput = Type.Object({
  scopes: Type.Array(literals(PROACTIVE_SCOPES), { maxItems: PROACTIVE_SCOPES.length * 2, description: 'what the app may put in its prompts; granted by installing' }),
});

const appBodyFields = {
  name: Type.String({ maxLength: APP_LIMITS.name, description: 'must not be blank' }),
  description: Type.Optional(Type.String({ maxLength: APP_LIMITS.description })),
  capabilities: Type.Array(literals(APP_CAPABILITIES), { maxItems: APP_CAPABILITIES.length * 2 }),
  external_integration: Type.Optional(nullable(ExternalIntegrationInput)),
  proactive_notification: Type.Optional(nullable(ProactiveInput)),
  private: Type.Optional(Type.Boolean({ description: 'true (the default): only you see and install it; false: every user can' })),
};

const CreateAppBody = Type.Object(appBodyFields, { title: 'CreateApp', description: 'a new app' });
const UpdateAppBody = Type.Partial(Type.Object(appBodyFields), { title: 'UpdateApp', description: 'the fields to change; the others are kept' });

const ExternalIntegrationView = Type.Object({
  triggers_on: Type.Union([literals(APP_TRIGGERS), Type.Null()]),
  webhook_url: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: "owner only" })),
  setup_completed_url: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'owner only' })),
  auth_url: Type.Union([Type.String(), Type.Null()]),
  auth_url_for_user: Type.Union([Type.String(), Type.Null()], { description: 'auth_url with your `uid` appended' }),
  setup_instructions: Type.Union([Type.String(), Type.Null()]),
  setup_instructions_url_for_user: Type.Union([Type.String(), Type.Null()], { description: 'when the instructions are a link: it, with your `uid` appended' }),
});

export const AppSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Type.String(),
  capabilities: Type.Array(literals(APP_CAPABILITIES)),
  external_integration: Type.Union([ExternalIntegrationView, Type.Null()]),
  proactive_notification: Type.Union([Type.Object({ scopes: Type.Array(literals(PROACTIVE_SCOPES)) }), Type.Null()]),
  private: Type.Boolean(),
  is_owner: Type.Boolean(),
  installed: Type.Boolean({ description: 'you installed it' }),
  secret_prefix: Type.Optional(Type.String({ description: 'owner only: first and last characters of the app secret' })),
  webhook_enabled: Type.Optional(Type.Boolean({ description: 'owner only' })),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
}, { title: 'App', description: 'an app users can install: what it is, what it asks for and where its events go' });

const CreatedAppSchema = Type.Intersect([AppSchema, Type.Object({ secret: Type.String({ description: 'the app secret (`svc_app_`); shown only in this response' }) })], { title: 'CreatedApp', description: 'the new app with its secret, shown once' });

const InstallationSchema = Type.Object({
  app_id: Type.String(),
  installed: Type.Literal(true),
  scopes: Type.Array(literals(PROACTIVE_SCOPES), { description: 'granted to the app by this install' }),
  installed_at: Type.String({ format: 'date-time' }),
}, { title: 'AppInstallation', description: 'an app installed for you, with the scopes it was granted' });

const ListAppsQuery = Type.Object({
  installed: Type.Optional(Type.Boolean({ description: 'true: only the apps you installed; false: only those you did not; omitted: both' })),
});

/** `url` with `uid` set in its query (what a user opens). */
function withUid(url: string, uid: string): string {
  const u = new URL(url);
  u.searchParams.set('uid', uid);
  return u.href;
}

function linkOrNull(text: string | null): URL | null {
  if (text === null || !/^https?:\/\//i.test(text.trim())) return null;
  try {
    return new URL(text.trim());
  } catch {
    return null;
  }
}

function view(a: AppRecord, uid: string, installed: boolean): Record<string, unknown> {
  const owner = a.ownerUid === uid;
  const ext = a.capabilities.includes('external_integration') || a.authUrl !== null || a.setupInstructions !== null || a.setupCompletedUrl !== null;
  const link = linkOrNull(a.setupInstructions);
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    capabilities: a.capabilities,
    external_integration: ext
      ? {
          triggers_on: a.triggersOn,
          ...(owner ? { webhook_url: a.webhookUrl, setup_completed_url: a.setupCompletedUrl } : {}),
          auth_url: a.authUrl,
          auth_url_for_user: a.authUrl === null ? null : withUid(a.authUrl, uid),
          setup_instructions: a.setupInstructions,
          setup_instructions_url_for_user: link === null ? null : withUid(link.href, uid),
        }
      : null,
    proactive_notification: a.capabilities.includes('proactive_notification') ? { scopes: a.proactiveScopes } : null,
    private: a.private,
    is_owner: owner,
    installed,
    ...(owner ? { secret_prefix: a.secretPrefix, webhook_enabled: a.webhookEnabled } : {}),
    created_at: a.createdAt,
    updated_at: a.updatedAt,
  };
}

type Ext = { triggers_on?: AppTrigger | null; webhook_url?: string | null; setup_completed_url?: string | null; auth_url?: string | null; setup_instructions?: string | null };

export function appRoutes(s: Services): AppRoute[] {
  const parts = webhookParts(s);
  const tags = ['Apps'];

  /** The body's fields over `base` (an update) or over nothing (a creation), checked as a whole. */
  async function fieldsFrom(body: Record<string, unknown>, base: AppFields | undefined): Promise<Partial<AppFields>> {
    const out: Partial<AppFields> = {};
    if (body.name !== undefined) {
      const name = (body.name as string).trim();
      if (name === '') throw valueError(['body', 'name'], 'App name cannot be empty');
      out.name = name;
    }
    if (body.description !== undefined) out.description = (body.description as string).trim();
    if (body.capabilities !== undefined) out.capabilities = APP_CAPABILITIES.filter((c) => (body.capabilities as string[]).includes(c)) as AppCapability[];
    if (body.private !== undefined) out.private = body.private as boolean;
    if (body.external_integration !== undefined) {
      const ext = (body.external_integration ?? { triggers_on: null, webhook_url: null, setup_completed_url: null, auth_url: null, setup_instructions: null }) as Ext;
      const loc = (f: string): string[] => ['body', 'external_integration', f];
      if (ext.triggers_on !== undefined) out.triggersOn = ext.triggers_on;
      if (ext.webhook_url !== undefined) out.webhookUrl = ext.webhook_url === null || ext.webhook_url.trim() === '' ? null : await checkDestination(parts.guard, ext.webhook_url.trim(), loc('webhook_url'));
      if (ext.setup_completed_url !== undefined) {
        out.setupCompletedUrl = ext.setup_completed_url === null || ext.setup_completed_url.trim() === '' ? null : await checkDestination(parts.guard, ext.setup_completed_url.trim(), loc('setup_completed_url'));
      }
      if (ext.auth_url !== undefined) {
        // A page the user's browser opens, never fetched by the service: only its form is checked.
        if (ext.auth_url === null || ext.auth_url.trim() === '') out.authUrl = null;
        else {
          try {
            out.authUrl = parseDestination(ext.auth_url.trim()).href;
          } catch (err) {
            if (err instanceof DestinationRefused) throw valueError(loc('auth_url'), 'must be an absolute http(s) URL without credentials');
            throw err;
          }
        }
      }
      if (ext.setup_instructions !== undefined) out.setupInstructions = ext.setup_instructions === null || ext.setup_instructions.trim() === '' ? null : ext.setup_instructions.trim();
    }
    if (body.proactive_notification !== undefined) {
      const scopes = (body.proactive_notification as { scopes: string[] } | null)?.scopes ?? [];
      out.proactiveScopes = PROACTIVE_SCOPES.filter((x) => scopes.includes(x)) as ProactiveScope[];
    }
    // The whole app must hang together: a capability needs its settings.
    const merged = { ...base, ...out } as Partial<AppFields>;
    const caps = merged.capabilities ?? [];
    if (caps.includes('external_integration')) {
      if (!merged.triggersOn) throw valueError(['body', 'external_integration', 'triggers_on'], 'is required with the external_integration capability');
      if (!merged.webhookUrl) throw valueError(['body', 'external_integration', 'webhook_url'], 'is required with the external_integration capability');
    } else if (body.external_integration != null && (merged.triggersOn || merged.webhookUrl)) {
      throw valueError(['body', 'capabilities'], 'must include external_integration for an app with a trigger or webhook URL');
    }
    if (caps.includes('proactive_notification')) {
      if ((merged.proactiveScopes ?? []).length === 0) throw valueError(['body', 'proactive_notification', 'scopes'], 'must name at least one scope with the proactive_notification capability');
    } else if ((body.proactive_notification as { scopes?: string[] } | null | undefined)?.scopes?.length) {
      throw valueError(['body', 'capabilities'], 'must include proactive_notification for an app with proactive scopes');
    }
    // A capability taken away takes its settings along, so no delivery or grant outlives it.
    if (!caps.includes('external_integration') && (merged.triggersOn || merged.webhookUrl)) {
      out.triggersOn = null;
      out.webhookUrl = null;
    }
    if (!caps.includes('proactive_notification') && (merged.proactiveScopes ?? []).length > 0) out.proactiveScopes = [];
    return out;
  }

  async function checkSetup(url: string, uid: string): Promise<void> {
    let res;
    try {
      res = await guardedRequest(parts.guard, withUid(url, uid), { method: 'GET', headers: { accept: 'application/json' }, timeoutMs: SETUP_CHECK_TIMEOUT_MS, maxResponseBytes: 16_384 });
    } catch (err) {
      const reason = err instanceof DestinationRefused ? err.message : (err as Error).name === 'TimeoutError' ? `no answer within ${SETUP_CHECK_TIMEOUT_MS / 1000} s` : 'the connection failed';
      throw new EngineError('ENG_ERR_APP_SETUP_CHECK_FAILED', { reason });
    }
    if (res.status < 200 || res.status > 299) {
      throw new EngineError('ENG_ERR_APP_SETUP_CHECK_FAILED', { reason: res.status >= 300 && res.status < 400 ? `it answered a redirect (HTTP ${res.status}), which is not followed` : `it answered HTTP ${res.status}` });
    }
    let done: unknown;
    try {
      done = (JSON.parse(res.body.toString('utf8')) as { is_setup_completed?: unknown }).is_setup_completed;
    } catch {
      done = undefined;
    }
    if (typeof done !== 'boolean') throw new EngineError('ENG_ERR_APP_SETUP_CHECK_FAILED', { reason: 'its answer has no boolean is_setup_completed' });
    if (!done) throw new EngineError('ENG_ERR_APP_SETUP_INCOMPLETE');
  }


  return [
    {
      method: 'get',
      path: '/v1/apps',
      operationId: 'listApps',
      summary: 'Apps you can install (public ones and your own) and those you installed, newest first',
      tags,
      auth: { kind: 'id_token' },
      query: ListAppsQuery,
      responses: { 200: { description: 'the apps', schema: Type.Array(AppSchema, { title: 'AppList', description: 'apps you can install, and those you installed' }) } },
      async handler({ auth, query }) {
        const [visible, installedApps] = await Promise.all([parts.apps.listVisible(auth.uid), parts.apps.listInstalled(auth.uid)]);
        const installed = new Set(installedApps.map((a) => a.id));
        // An installed app that has since turned private still shows, so it can be uninstalled.
        const all = [...visible, ...installedApps.filter((a) => !visible.some((v) => v.id === a.id))].sort((a, b) => (a.createdAt === b.createdAt ? b.id.localeCompare(a.id) : b.createdAt.localeCompare(a.createdAt)));
        const wanted = query.installed as boolean | undefined;
        const apps = wanted === undefined ? all : all.filter((a) => installed.has(a.id) === wanted);
        return { body: apps.map((a) => view(a, auth.uid, installed.has(a.id))) };
      },
    },
    {
      method: 'post',
      path: '/v1/apps',
      operationId: 'createApp',
      summary: 'Create an app; the response is the only time its secret is shown',
      tags,
      auth: { kind: 'id_token' },
      body: CreateAppBody,
      responses: { 200: { description: 'the new app, with its secret', schema: CreatedAppSchema }, 400: { description: 'a URL is refused; `detail` names the rule' } },
      async handler({ auth, body }) {
        const fields = await fieldsFrom(body as Record<string, unknown>, undefined);
        const full: AppFields = {
          name: fields.name!,
          description: fields.description ?? '',
          capabilities: fields.capabilities ?? [],
          triggersOn: fields.triggersOn ?? null,
          webhookUrl: fields.webhookUrl ?? null,
          proactiveScopes: fields.proactiveScopes ?? [],
          setupCompletedUrl: fields.setupCompletedUrl ?? null,
          authUrl: fields.authUrl ?? null,
          setupInstructions: fields.setupInstructions ?? null,
          private: fields.private ?? true,
        };
        const secret = generateKey('app');
        const app = await parts.apps.create({ ownerUid: auth.uid, fields: full, secretHash: secret.hash, secretPrefix: secret.prefix, now: s.clock.now() });
        s.logger.info({ appId: app.id }, 'app created');
        return { body: { ...view(app, auth.uid, false), secret: secret.key } };
      },
    },
    {
      method: 'get',
      path: '/v1/apps/{app_id}',
      operationId: 'getApp',
      summary: 'One app you can see (public, or yours)',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the app', schema: AppSchema }, 404: { description: 'no such app you can see' } },
      async handler({ auth, params }) {
        const app = (await parts.apps.visible(params.app_id!, auth.uid)) ?? (await parts.apps.listInstalled(auth.uid)).find((a) => a.id === params.app_id);
        if (!app) throw notFound('App');
        return { body: view(app, auth.uid, (await parts.apps.installation(app.id, auth.uid)) !== undefined) };
      },
    },
    {
      method: 'patch',
      path: '/v1/apps/{app_id}',
      operationId: 'updateApp',
      summary: 'Update your app; fields left out keep their value, null clears an optional one',
      tags,
      auth: { kind: 'id_token' },
      body: UpdateAppBody,
      responses: { 200: { description: 'the app', schema: AppSchema }, 400: { description: 'a URL is refused' }, 404: { description: 'no such app of yours' } },
      async handler({ auth, params, body }) {
        const app = await parts.apps.owned(params.app_id!, auth.uid);
        if (!app) throw notFound('App');
        if (Object.keys(body as object).length === 0) throw valueError(['body'], 'At least one field must be provided');
        const fields = await fieldsFrom(body as Record<string, unknown>, app);
        const updated = await parts.apps.update(auth.uid, app.id, fields, s.clock.now());
        if (!updated) throw notFound('App');
        s.logger.info({ appId: app.id }, 'app updated');
        return { body: view(updated, auth.uid, (await parts.apps.installation(app.id, auth.uid)) !== undefined) };
      },
    },
    {
      method: 'delete',
      path: '/v1/apps/{app_id}',
      operationId: 'deleteApp',
      summary: 'Delete your app, every install of it and its webhook secret',
      tags,
      auth: { kind: 'id_token' },
      responses: { 204: { description: 'deleted' }, 404: { description: 'no such app of yours' } },
      async handler({ auth, params }) {
        if (!(await parts.apps.delete(auth.uid, params.app_id!))) throw notFound('App');
        s.logger.info({ appId: params.app_id }, 'app deleted');
        return { status: 204 };
      },
    },
    {
      method: 'post',
      path: '/v1/apps/{app_id}/secret/rotate',
      operationId: 'rotateAppSecret',
      summary: "Replace your app's secret; the old one stops working at once and the new one is shown only here",
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the new secret', schema: Type.Object({ secret: Type.String(), secret_prefix: Type.String() }, { title: 'AppSecret', description: 'the new app secret, shown once' }) }, 404: { description: 'no such app of yours' } },
      async handler({ auth, params }) {
        const secret = generateKey('app');
        if (!(await parts.apps.replaceSecret(auth.uid, params.app_id!, secret.hash, secret.prefix, s.clock.now()))) throw notFound('App');
        s.logger.info({ appId: params.app_id }, 'app secret rotated');
        return { body: { secret: secret.key, secret_prefix: secret.prefix } };
      },
    },
    ...webhookSecretRoutes(s, {
      path: '/v1/apps/{app_id}/webhook-secret',
      name: 'AppWebhookSecret',
      whose: "your app's webhooks",
      tags,
      notFound: 'no such app of yours',
      owner: async ({ auth, params }) => {
        const app = await parts.apps.owned(params.app_id!, auth.uid);
        return app ? { kind: 'app', id: app.id } : undefined;
      },
    }),
    ...deliveryRoutes(s, {
      path: '/v1/apps/{app_id}/webhooks',
      name: 'AppWebhook',
      whose: "your app's webhooks",
      tags,
      owner: async ({ auth, params }) => {
        const app = await parts.apps.owned(params.app_id!, auth.uid);
        return app ? { kind: 'app', id: app.id } : undefined;
      },
    }),
    {
      method: 'post',
      path: '/v1/apps/{app_id}/install',
      operationId: 'installApp',
      summary: "Install an app, granting its declared scopes; an app with a Setup Completed URL is asked first",
      description: `The Setup Completed URL is called with GET and \`uid\` appended (${SETUP_CHECK_TIMEOUT_MS / 1000} s timeout, redirects not followed). Installing again refreshes the granted scopes.`,
      tags,
      auth: { kind: 'id_token' },
      responses: {
        200: { description: 'installed', schema: InstallationSchema },
        404: { description: 'no such app you can see' },
        409: { description: 'the app says your setup is not completed' },
        502: { description: "the app's setup check failed" },
      },
      async handler({ auth, params }) {
        const app = await parts.apps.visible(params.app_id!, auth.uid);
        if (!app) throw notFound('App');
        if (app.setupCompletedUrl !== null) await checkSetup(app.setupCompletedUrl, auth.uid);
        const scopes = app.capabilities.includes('proactive_notification') ? app.proactiveScopes : [];
        const inst = await parts.apps.install(app.id, auth.uid, scopes, s.clock.now());
        s.logger.info({ appId: app.id }, 'app installed');
        return { body: { app_id: app.id, installed: true, scopes: inst.scopes, installed_at: inst.installedAt } };
      },
    },
    {
      method: 'delete',
      path: '/v1/apps/{app_id}/install',
      operationId: 'uninstallApp',
      summary: 'Uninstall an app: its webhooks stop and its granted scopes are withdrawn',
      tags,
      auth: { kind: 'id_token' },
      responses: { 204: { description: 'uninstalled' }, 404: { description: 'you have not installed this app' } },
      async handler({ auth, params }) {
        if (!(await parts.apps.uninstall(params.app_id!, auth.uid))) throw notFound('Installation');
        s.logger.info({ appId: params.app_id }, 'app uninstalled');
        return { status: 204 };
      },
    },
  ];
}
