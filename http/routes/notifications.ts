// Notifications: a user's outbox (list, mark read, a server-sent event stream) and the direct notification an app
// sends a user who installed it, authenticated by the app's secret and limited per app, user and clock hour.
import { Type } from '@sinclair/typebox';
import { EngineError, isEngineError, valueError } from '../../engine/errors.js';
import { hashKey, parseKey } from '../../engine/identity/key-format.js';
import { webhookParts } from '../../engine/webhooks/parts.js';
import { DIRECT_PER_HOUR, DirectLimit, type LimitState } from '../../engine/notifications/direct-limit.js';
import { notificationView, type NotificationView } from '../../engine/notifications/notifier.js';
import { compile } from '../validation.js';
import type { StreamSink } from '../adapter.js';
import { Limit, Offset, pagingHeaders, splitPage } from './common.js';
import type { AppRoute, Services } from './types.js';

/** Longest direct notification text, in characters (a push carries about 4 KB in all). */
export const MAX_DIRECT_MESSAGE_CHARS = 2000;
export const DEFAULT_NOTIFICATIONS_PAGE = 50;
export const MAX_NOTIFICATIONS_PAGE = 200;
/** Ids one mark-read request may name. */
export const MAX_READ_IDS = 500;
/** A comment on an idle stream this often keeps proxies from closing it. */
export const SSE_HEARTBEAT_MS = 15_000;
/** Rows read per round trip while a reconnecting stream replays what it missed. */
const REPLAY_PAGE = 200;

export const NotificationSchema = Type.Object({
  id: Type.Integer({ description: 'increasing per deployment; the event id on the stream' }),
  title: Type.String(),
  body: Type.String(),
  data: Type.Record(Type.String(), Type.String(), { description: 'what the client needs to open the right screen, e.g. `navigate_to`' }),
  source: Type.String({ description: 'app, proactive, webhook, day_summary or system' }),
  app_id: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  read_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
}, { title: 'Notification', description: 'a notification sent to you' });

const ListQuery = Type.Object({
  limit: Limit(DEFAULT_NOTIFICATIONS_PAGE, MAX_NOTIFICATIONS_PAGE),
  offset: Offset(),
  unread: Type.Optional(Type.Boolean({ description: 'true: only those not yet marked read' })),
});

const ReadBody = Type.Object({
  ids: Type.Optional(Type.Array(Type.Integer({ minimum: 1 }), { maxItems: MAX_READ_IDS, description: 'these notifications' })),
  up_to: Type.Optional(Type.Integer({ minimum: 0, description: 'every notification with an id up to this one' })),
}, { title: 'MarkRead', description: 'exactly one of `ids` or `up_to`' });

/** The direct notification's query as documented; checked in the handler, after the credentials. */
const DirectQueryDoc = Type.Object({
  uid: Type.Optional(Type.String({ description: 'required: the user to notify' })),
  message: Type.Optional(Type.String({ description: `required: the notification text, 1 to ${MAX_DIRECT_MESSAGE_CHARS} characters` })),
});

const DirectQuery = Type.Object({
  uid: Type.String({ minLength: 1, maxLength: 128 }),
  message: Type.String({ minLength: 1, maxLength: MAX_DIRECT_MESSAGE_CHARS }),
});

const sseEvent = (n: NotificationView): string => `id: ${n.id}\nevent: notification\ndata: ${JSON.stringify(n)}\n\n`;

export function notificationRoutes(s: Services): AppRoute[] {
  const tags = ['Notifications'];
  const outbox = s.notifier.notifications;
  const limit = new DirectLimit({ redis: s.redis, clock: s.clock, prefix: s.config.redisPrefix });
  const checkDirect = compile(DirectQuery, 'query');

  /** Streams `uid`'s new notifications; with `after`, first replays those after it (a reconnect's Last-Event-ID). */
  function stream(uid: string, after: number | undefined, sink: StreamSink): void {
    sink.write(': open\n\n');
    const replayed = new Set<number>();
    const waiting: NotificationView[] = [];
    let replaying = after !== undefined;
    const send = (n: NotificationView): void => {
      if ((after !== undefined && n.id <= after) || replayed.has(n.id)) return;
      sink.write(sseEvent(n));
    };
    const unsubscribe = s.notifier.subscribe(uid, (n) => (replaying ? waiting.push(n) : send(n)));
    const beat = setInterval(() => sink.write(': keep-alive\n\n'), SSE_HEARTBEAT_MS);
    beat.unref();
    sink.onClose(() => {
      unsubscribe();
      clearInterval(beat);
    });
    if (after === undefined) return;
    void (async () => {
      let cursor = after;
      for (;;) {
        const rows = await outbox.after(uid, cursor, REPLAY_PAGE);
        for (const r of rows) {
          if (sink.closed) return;
          sink.write(sseEvent(notificationView(r)));
          replayed.add(r.id);
          cursor = r.id;
        }
        if (rows.length < REPLAY_PAGE) break;
      }
      replaying = false;
      for (const n of waiting.splice(0).sort((a, b) => a.id - b.id)) send(n);
    })().catch(() => {
      s.logger.warn('notification stream replay failed');
      sink.end();
    });
  }

  return [
    {
      method: 'get',
      path: '/v1/notifications',
      operationId: 'listNotifications',
      summary: 'Your notifications, newest first',
      tags,
      auth: { kind: 'id_token' },
      query: ListQuery,
      responses: { 200: { description: 'a page of notifications', schema: Type.Array(NotificationSchema, { title: 'NotificationList', description: 'a page of your notifications, newest first' }) } },
      async handler({ auth, query }) {
        const page = Math.min(query.limit as number, MAX_NOTIFICATIONS_PAGE);
        const rows = await outbox.list(auth.uid, { limit: page + 1, offset: query.offset as number, unreadOnly: query.unread === true });
        const { items, more } = splitPage(rows, page);
        return { body: items.map(notificationView), headers: pagingHeaders('/v1/notifications', query, page, more) };
      },
    },
    {
      method: 'post',
      path: '/v1/notifications/read',
      operationId: 'markNotificationsRead',
      summary: 'Mark notifications read: the ones named, or every one up to an id',
      tags,
      auth: { kind: 'id_token' },
      body: ReadBody,
      responses: { 200: { description: 'how many were unread and now are read', schema: Type.Object({ updated: Type.Integer() }, { title: 'MarkedRead', description: 'notifications marked read' }) } },
      async handler({ auth, body }) {
        const b = body as { ids?: number[]; up_to?: number };
        if ((b.ids === undefined) === (b.up_to === undefined)) throw valueError(['body'], 'give exactly one of ids or up_to');
        const updated = await outbox.markRead(auth.uid, b.ids !== undefined ? { ids: b.ids } : { upTo: b.up_to! }, s.clock.now());
        return { body: { updated } };
      },
    },
    {
      method: 'get',
      path: '/v1/notifications/stream',
      operationId: 'streamNotifications',
      summary: 'Your new notifications as server-sent events, from any node; Last-Event-ID replays what a reconnect missed',
      description: `Each event is \`event: notification\` with the notification as \`data\` and its id as the event id. A comment is sent every ${SSE_HEARTBEAT_MS / 1000} s.`,
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'text/event-stream' } },
      handler({ auth, headers }) {
        const raw = headers['last-event-id'];
        const after = raw !== undefined && /^\d{1,15}$/.test(raw.trim()) ? Number(raw.trim()) : undefined;
        return { contentType: 'text/event-stream', headers: { 'x-accel-buffering': 'no' }, stream: (sink) => stream(auth.uid, after, sink) };
      },
    },
    {
      method: 'post',
      path: '/v2/integrations/{app_id}/notification',
      operationId: 'sendDirectNotification',
      summary: 'Send a user who installed your app a notification with exact text (Authorization: Bearer <app secret>)',
      description: `Titled "<app name> says". At most ${DIRECT_PER_HOUR} per app per user per clock hour (UTC); every answer carries X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix time the hour ends).`,
      tags,
      auth: { kind: 'none' },
      query: DirectQueryDoc,
      responses: {
        200: { description: 'sent', schema: Type.Object({ status: Type.Literal('Ok') }, { title: 'NotificationSent', description: 'the notification is in the user\'s outbox and on its way to their devices' }) },
        401: { description: 'missing or malformed Authorization header, or not this app\'s secret' },
        404: { description: 'unknown app, unknown user, or the user has not installed the app' },
        422: { description: 'uid or message missing, empty or too long' },
        429: { description: 'the hourly limit is reached; Retry-After says when the hour ends' },
      },
      async handler({ params, query, headers }) {
        const appId = params.app_id!;
        const rawUid = typeof query.uid === 'string' && query.uid !== '' && query.uid.length <= 128 ? (query.uid as string) : undefined;
        let state: LimitState | undefined;
        try {
          const secret = /^Bearer (\S+)$/.exec(headers.authorization ?? '')?.[1];
          if (secret === undefined) throw new EngineError('ENG_ERR_AUTH_HEADER_MISSING');
          const { uid, message } = checkDirect(query) as { uid: string; message: string };
          if (message.trim() === '') throw valueError(['query', 'message'], 'must not be blank');
          const { apps } = webhookParts(s);
          const caller = parseKey(secret) === 'app' ? await outbox.directTarget(hashKey(secret), uid) : undefined;
          const app = caller?.appId === appId ? caller : undefined;
          if (!app) {
            if (!(await apps.get(appId))) throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'App' });
            throw new EngineError('ENG_ERR_AUTH_KEY_INVALID');
          }
          if (!app.installed) {
            const known = (await s.users.get(uid)) !== undefined || (await apps.installedIds(uid)).size > 0;
            throw known ? new EngineError('ENG_ERR_APP_NOT_INSTALLED') : new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'User' });
          }
          state = await limit.take(appId, uid);
          if (!state.allowed) {
            throw new EngineError('ENG_ERR_NOTIFICATION_RATE_LIMITED', { limit: DIRECT_PER_HOUR }, { headers: { 'retry-after': String(state.retryAfterS) } });
          }
          const n = await s.notifier.notify(uid, {
            title: `${app.appName} says`,
            body: message,
            data: { notification_type: 'plugin', navigate_to: `/chat/${appId}`, app_id: appId },
            source: 'app',
            appId,
          });
          s.logger.debug({ appId, notificationId: n.id }, 'direct notification sent');
          return { body: { status: 'Ok' }, headers: state.headers };
        } catch (err) {
          if (!isEngineError(err)) throw err;
          // Every answer carries the window's headers; a Redis that does not answer leaves the refusal as it is.
          state ??= await (rawUid === undefined ? Promise.resolve(limit.fresh()) : limit.peek(appId, rawUid)).catch(() => undefined);
          if (state === undefined) throw err;
          throw new EngineError(err.code, {}, { detail: err.detail, headers: { ...err.headers, ...state.headers }, cause: err });
        }
      },
    },
  ];
}
