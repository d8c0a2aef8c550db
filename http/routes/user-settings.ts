// A signed-in user's settings (display name, time zone, language, day summary), the push tokens of their devices, and
// the deletion of their account.
import { Type } from '@sinclair/typebox';
import { valueError } from '../../engine/errors.js';
import type { UserSettings } from '../../engine/db/user-settings.js';
import { notFound, requireSomeField } from './common.js';
import type { AppRoute, Services } from './types.js';

/** Longest push token accepted, in characters (FCM tokens are about 160). */
export const MAX_PUSH_TOKEN_CHARS = 1024;

const TimeZone = Type.String({ minLength: 1, maxLength: 64, description: 'an IANA time zone such as Europe/Paris' });

const SettingsSchema = Type.Object({
  name: Type.Union([Type.String(), Type.Null()], { description: 'how notifications address you ({{user_name}})' }),
  time_zone: Type.Union([Type.String(), Type.Null()], { description: 'IANA time zone; the day summary needs one' }),
  language: Type.Union([Type.String(), Type.Null()], { description: 'BCP 47 language tag' }),
  daily_summary_enabled: Type.Boolean(),
  daily_summary_hour: Type.Integer({ minimum: 0, maximum: 23, description: 'local hour the day summary comes at' }),
}, { title: 'UserSettings', description: 'your settings; defaults until you save them' });

const SettingsPatch = Type.Object({
  name: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
  time_zone: Type.Optional(Type.Union([TimeZone, Type.Null()])),
  language: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 16 }), Type.Null()])),
  daily_summary_enabled: Type.Optional(Type.Boolean()),
  daily_summary_hour: Type.Optional(Type.Integer({ minimum: 0, maximum: 23 })),
}, { title: 'UserSettingsUpdate', description: 'the fields to change; null clears an optional one' });

const TokenBody = Type.Object({
  fcm_token: Type.String({ minLength: 1, maxLength: MAX_PUSH_TOKEN_CHARS, description: "the device's push token" }),
  time_zone: Type.Optional(TimeZone),
}, { title: 'PushTokenRegistration', description: "a device's push token (and, optionally, your time zone)" });

const TokenDelete = Type.Object({ fcm_token: Type.String({ minLength: 1, maxLength: MAX_PUSH_TOKEN_CHARS }) }, { title: 'PushTokenRemoval', description: 'the push token to remove' });

const OkSchema = Type.Object({ status: Type.Literal('Ok') }, { title: 'Ok', description: 'done' });

/** The canonical IANA name of `value`, or a 422 at `loc` (UTC offsets and unknown names are refused). */
export function ianaTimeZone(value: string, loc: (string | number)[]): string {
  if (/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(value)) {
    try {
      return new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
    } catch {
      // refused below
    }
  }
  throw valueError(loc, `'${value.slice(0, 64)}' is not an IANA time zone`);
}

function languageTag(value: string): string {
  try {
    const [tag] = Intl.getCanonicalLocales(value);
    if (tag) return tag;
  } catch {
    // refused below
  }
  throw valueError(['body', 'language'], `'${value}' is not a BCP 47 language tag`);
}

const view = (s: UserSettings): Record<string, unknown> => ({
  name: s.name,
  time_zone: s.timeZone,
  language: s.language,
  daily_summary_enabled: s.dailySummaryEnabled,
  daily_summary_hour: s.dailySummaryHour,
});

export function userSettingsRoutes(s: Services): AppRoute[] {
  const tags = ['Notifications'];
  return [
    {
      method: 'get',
      path: '/v1/users/settings',
      operationId: 'getUserSettings',
      summary: 'Your settings: name, time zone, language and the day summary',
      tags,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'your settings', schema: SettingsSchema } },
      async handler({ auth }) {
        return { body: view(await s.userSettings.get(auth.uid)) };
      },
    },
    {
      method: 'patch',
      path: '/v1/users/settings',
      operationId: 'updateUserSettings',
      summary: 'Change your settings; fields left out keep their value',
      tags,
      auth: { kind: 'id_token' },
      body: SettingsPatch,
      responses: { 200: { description: 'your settings', schema: SettingsSchema } },
      async handler({ auth, body }) {
        const b = body as { name?: string | null; time_zone?: string | null; language?: string | null; daily_summary_enabled?: boolean; daily_summary_hour?: number };
        requireSomeField(b, ['name', 'time_zone', 'language', 'daily_summary_enabled', 'daily_summary_hour']);
        const fields: Partial<UserSettings> = {};
        if (b.name !== undefined) fields.name = b.name === null || b.name.trim() === '' ? null : b.name.trim();
        if (b.time_zone !== undefined) fields.timeZone = b.time_zone === null ? null : ianaTimeZone(b.time_zone, ['body', 'time_zone']);
        if (b.language !== undefined) fields.language = b.language === null ? null : languageTag(b.language);
        if (b.daily_summary_enabled !== undefined) fields.dailySummaryEnabled = b.daily_summary_enabled;
        if (b.daily_summary_hour !== undefined) fields.dailySummaryHour = b.daily_summary_hour;
        return { body: view(await s.userSettings.update(auth.uid, fields, s.clock.now())) };
      },
    },
    {
      method: 'post',
      path: '/v1/users/fcm-token',
      operationId: 'registerPushToken',
      summary: "Register a device's push token (one per device; registering again refreshes it); a time zone given is saved to your settings",
      tags,
      auth: { kind: 'id_token' },
      body: TokenBody,
      responses: { 200: { description: 'registered', schema: OkSchema } },
      async handler({ auth, body }) {
        const b = body as { fcm_token: string; time_zone?: string };
        const zone = b.time_zone === undefined ? null : ianaTimeZone(b.time_zone, ['body', 'time_zone']);
        const now = s.clock.now();
        const token = await s.userSettings.saveToken(auth.uid, b.fcm_token, zone, now);
        if (zone !== null) await s.userSettings.update(auth.uid, { timeZone: zone }, now);
        s.logger.info({ tokenId: token.id }, 'push token registered');
        return { body: { status: 'Ok' } };
      },
    },
    {
      method: 'delete',
      path: '/v1/users/fcm-token',
      operationId: 'removePushToken',
      summary: "Remove a device's push token (given in the body, so it stays out of URLs and access logs)",
      tags,
      auth: { kind: 'id_token' },
      body: TokenDelete,
      responses: { 204: { description: 'removed' }, 404: { description: 'no such token of yours' } },
      async handler({ auth, body }) {
        if (!(await s.userSettings.deleteToken(auth.uid, (body as { fcm_token: string }).fcm_token))) throw notFound('Push token');
        return { status: 204 };
      },
    },
    {
      method: 'delete',
      path: '/v1/users/delete-account',
      operationId: 'deleteAccount',
      summary: 'Delete your account and everything the service holds of you',
      description:
        'Closes your live sessions on every node (close code 4410, once each has finished its audio), then erases your ' +
        'conversations with their transcripts and photos, memories, action items, goals, day summaries, speech profile, ' +
        'people and voice samples, settings, push tokens, notifications, usage, webhooks and their delivery log, offline ' +
        'sync jobs and uploads, your developer and MCP keys (refused at once on every node), and the apps you own with ' +
        'their installs. Cannot be undone. ID tokens issued before the deletion are refused from its start (401), except ' +
        'here: if it fails part way (503), asking again with the same token finishes it. Signing in again afterwards ' +
        'starts an empty account. Answers once everything is erased.',
      tags,
      auth: { kind: 'id_token', ofDeletedAccount: true },
      responses: { 200: { description: 'deleted', schema: OkSchema } },
      async handler({ auth }) {
        await s.accounts.delete(auth.uid);
        return { body: { status: 'Ok' } };
      },
    },
  ];
}
