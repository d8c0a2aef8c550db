// GET /v1/users/usage: the signed-in user's speech-to-text usage per UTC day and provider, with totals.
import { Type } from '@sinclair/typebox';
import { valueError } from '../../engine/errors.js';
import { DAY_MS, utcDay } from '../../engine/db/store.js';
import type { AppRoute, Services } from './types.js';

/** Days answered when the request names none (today included). */
export const DEFAULT_USAGE_DAYS = 30;
/** Longest range one request may ask for, in days, both ends included. */
export const MAX_USAGE_DAYS = 366;

const Day = (description: string) => Type.Optional(Type.String({ format: 'date', description }));

const UsageQuery = Type.Object({
  start_date: Day(`first UTC day (YYYY-MM-DD), included; default: ${DEFAULT_USAGE_DAYS - 1} days before end_date`),
  end_date: Day(`last UTC day (YYYY-MM-DD), included; default: ${DEFAULT_USAGE_DAYS - 1} days after start_date when it is given, else today`),
});

const Amounts = {
  audio_seconds: Type.Number({ minimum: 0, description: 'seconds of audio transcribed, to the millisecond' }),
  words: Type.Integer({ minimum: 0, description: 'words transcribed' }),
};

const UsageSchema = Type.Object({
  days: Type.Array(
    Type.Object({
      date: Type.String({ format: 'date', description: 'UTC day' }),
      provider: Type.String({ description: 'speech engine: provider_a, provider_b, local or custom' }),
      ...Amounts,
    }),
    { description: 'one entry per day and provider with usage, by date then provider' },
  ),
  total: Type.Object(Amounts, { description: 'sums over `days`' }),
}, { title: 'Usage', description: 'speech-to-text usage per UTC day and provider' });

/** Rounds to the millisecond, so sums of floats read as the amounts they are. */
const seconds = (s: number): number => Math.round(s * 1000) / 1000;

const dayMs = (day: string): number => Date.parse(`${day}T00:00:00Z`);

/** The inclusive range a query asks for (a missing end is 29 days from the other), or a 422 naming the parameter at fault. */
function range(query: { start_date?: string; end_date?: string }, now: number): { from: string; to: string } {
  const span = (DEFAULT_USAGE_DAYS - 1) * DAY_MS;
  const to = query.end_date ?? (query.start_date === undefined ? utcDay(now) : utcDay(dayMs(query.start_date) + span));
  const from = query.start_date ?? utcDay(dayMs(to) - span);
  const days = (dayMs(to) - dayMs(from)) / DAY_MS + 1;
  if (days < 1) throw valueError(['query', 'end_date'], 'end_date must not be before start_date');
  if (days > MAX_USAGE_DAYS) throw valueError(['query', 'end_date'], `the range may cover at most ${MAX_USAGE_DAYS} days`);
  return { from, to };
}

export function usageRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'get',
      path: '/v1/users/usage',
      operationId: 'getMyUsage',
      summary: 'Your speech-to-text usage per day and provider (signed-in user)',
      description: `Seconds of audio and words transcribed, per UTC day and provider, both ends included. Default: the last ${DEFAULT_USAGE_DAYS} days; at most ${MAX_USAGE_DAYS} days per request (more answers 422).`,
      tags: ['Users'],
      auth: { kind: 'id_token' },
      query: UsageQuery,
      responses: { 200: { description: 'usage and totals', schema: UsageSchema } },
      async handler({ auth, query }) {
        const { from, to } = range(query as { start_date?: string; end_date?: string }, s.clock.now());
        const rows = await s.usage.list(auth.uid, from, to);
        let audio = 0;
        let words = 0;
        const days = rows.map((r) => {
          audio += r.audioSeconds;
          words += r.words;
          return { date: r.day, provider: r.provider, audio_seconds: seconds(r.audioSeconds), words: r.words };
        });
        return { body: { days, total: { audio_seconds: seconds(audio), words } } };
      },
    },
  ];
}
