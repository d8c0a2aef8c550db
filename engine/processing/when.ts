// Date and time phrases ("tomorrow at 3pm", "next Monday", "on March 3rd", "at 14:30") resolved in UTC relative to a conversation's start.

const WEEKDAYS = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'] as const;
const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'] as const;
const MONTH_RE = '(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)';
const WEEKDAY_RE = '(sunday|monday|tuesday|wednesday|thursday|friday|saturday)';

/** Hour used when a day is named without a time. */
export const DEFAULT_HOUR_UTC = 9;

export interface When {
  /** ISO 8601 UTC. */
  start: string;
  /** Whether a clock time was said (not only a day). */
  hasClock: boolean;
}

const DAY_MS = 86_400_000;

interface Clock {
  hour: number;
  minute: number;
}

const CLOCK_PATTERNS: ReadonlyArray<{ re: RegExp; read(m: RegExpExecArray): Clock | undefined }> = [
  {
    // 3pm, 3:30 pm, 10 a.m.
    re: /\b(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?)(?=\W|$)/i,
    read: (m) => {
      let hour = Number(m[1]);
      const minute = Number(m[2] ?? 0);
      if (hour < 1 || hour > 12 || minute > 59) return undefined;
      const pm = m[3]!.toLowerCase().startsWith('p');
      if (hour === 12) hour = pm ? 12 : 0;
      else if (pm) hour += 12;
      return { hour, minute };
    },
  },
  {
    // 14:30
    re: /\b([01]?\d|2[0-3]):([0-5]\d)\b/,
    read: (m) => ({ hour: Number(m[1]), minute: Number(m[2]) }),
  },
  {
    re: /\b(noon|midday|midnight)\b/i,
    read: (m) => ({ hour: m[1]!.toLowerCase() === 'midnight' ? 0 : 12, minute: 0 }),
  },
  {
    // "at 10", "at 3": 1–7 read as afternoon, 8–11 as morning, as people say them in conversation.
    re: /\bat (\d{1,2})(?: o'clock)?\b(?!\s*(?:%|percent|minutes?|hours?|people|[:.]\d))/i,
    read: (m) => {
      const h = Number(m[1]);
      if (h < 1 || h > 12) return undefined;
      return { hour: h <= 7 ? h + 12 : h, minute: 0 };
    },
  },
];

const PART_OF_DAY: Readonly<Record<string, number>> = { morning: 9, afternoon: 15, evening: 18, tonight: 20, night: 20 };

function readClock(s: string): Clock | undefined {
  for (const p of CLOCK_PATTERNS) {
    const m = p.re.exec(s);
    if (m) {
      const c = p.read(m);
      if (c) return c;
    }
  }
  return undefined;
}

function monthIndex(name: string): number {
  const lower = name.toLowerCase().slice(0, 3);
  return MONTHS.findIndex((m) => m.startsWith(lower));
}

/** Midnight UTC of the day `ms` falls on. */
const dayStart = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;

/** The day (midnight UTC) a sentence names, or undefined when it names none. */
function readDay(s: string, base: number): number | undefined {
  const today = dayStart(base);
  const weekday = new Date(base).getUTCDay();
  if (/\bday after tomorrow\b/i.test(s)) return today + 2 * DAY_MS;
  if (/\btomorrow\b/i.test(s)) return today + DAY_MS;
  if (/\b(today|tonight|this (?:morning|afternoon|evening))\b/i.test(s)) return today;
  let m = new RegExp(`\\bnext ${WEEKDAY_RE}\\b`, 'i').exec(s);
  if (m) {
    const target = WEEKDAYS.indexOf(m[1]!.toLowerCase() as (typeof WEEKDAYS)[number]);
    let delta = (target - weekday + 7) % 7;
    if (delta === 0) delta = 7;
    return today + delta * DAY_MS;
  }
  m = new RegExp(`\\b${MONTH_RE}\\.? (\\d{1,2})(?:st|nd|rd|th)?\\b`, 'i').exec(s) ?? null;
  let month: number | undefined;
  let day: number | undefined;
  if (m) {
    month = monthIndex(m[1]!);
    day = Number(m[2]);
  } else {
    m = new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?(?: of)? ${MONTH_RE}\\b`, 'i').exec(s);
    if (m) {
      month = monthIndex(m[2]!);
      day = Number(m[1]);
    }
  }
  if (month !== undefined && day !== undefined && month >= 0 && day >= 1 && day <= 31) {
    const year = new Date(base).getUTCFullYear();
    let t = Date.UTC(year, month, day);
    if (t < today) t = Date.UTC(year + 1, month, day);
    return t;
  }
  m = new RegExp(`\\b(?:on |this |coming )?${WEEKDAY_RE}\\b`, 'i').exec(s);
  if (m) {
    const target = WEEKDAYS.indexOf(m[1]!.toLowerCase() as (typeof WEEKDAYS)[number]);
    let delta = (target - weekday + 7) % 7;
    if (delta === 0) delta = 7;
    return today + delta * DAY_MS;
  }
  if (/\bnext week\b/i.test(s)) return today + 7 * DAY_MS;
  return undefined;
}

/**
 * Resolves the first date/time phrase of `sentence` relative to `startedAt` (UTC).
 * A clock time without a day is the next such time after the start; a day without a time is 09:00 (or the part of day said).
 */
export function resolveWhen(sentence: string, startedAt: string): When | undefined {
  const base = Date.parse(startedAt);
  if (Number.isNaN(base)) return undefined;
  const s = sentence.replace(/\s+/g, ' ');
  const relative = /\bin (\d{1,3}|an?|half an) (minutes?|mins?|hours?)\b/i.exec(s);
  if (relative) {
    const n = /^an?$/i.test(relative[1]!) ? 1 : /half/i.test(relative[1]!) ? 0.5 : Number(relative[1]);
    const ms = /^h/i.test(relative[2]!) ? n * 3_600_000 : n * 60_000;
    return { start: new Date(base + ms).toISOString(), hasClock: true };
  }
  const day = readDay(s, base);
  const clock = readClock(s);
  if (day === undefined && clock === undefined) return undefined;
  if (clock) {
    let t = (day ?? dayStart(base)) + clock.hour * 3_600_000 + clock.minute * 60_000;
    if (day === undefined && t < base) t += DAY_MS;
    return { start: new Date(t).toISOString(), hasClock: true };
  }
  const part = /\b(morning|afternoon|evening|tonight|night)\b/i.exec(s);
  const hour = part ? PART_OF_DAY[part[1]!.toLowerCase()]! : DEFAULT_HOUR_UTC;
  return { start: new Date(day! + hour * 3_600_000).toISOString(), hasClock: false };
}

const NUMBER_WORDS: Readonly<Record<string, number>> = { two: 2, three: 3, four: 4, five: 5, six: 6 };

/** Minutes said with "for …" ("for an hour", "for 45 minutes", "for an hour and a half"); undefined when none. */
export function parseDurationMinutes(sentence: string): number | undefined {
  const m = /\bfor (an?|one|two|three|four|five|six|half an|\d+(?:\.\d+)?) (hours?|minutes?|mins?)( and a half)?\b/i.exec(sentence);
  if (!m) return undefined;
  const word = m[1]!.toLowerCase();
  const n = /^(an?|one)$/.test(word) ? 1 : /half/.test(word) ? 0.5 : (NUMBER_WORDS[word] ?? Number(word));
  let minutes = /^h/i.test(m[2]!) ? n * 60 : n;
  if (m[3]) minutes += /^h/i.test(m[2]!) ? 30 : 0;
  return Math.max(1, Math.round(minutes));
}

/** The sentence without its date/time phrases, for titles. */
export function stripWhen(sentence: string): string {
  return sentence
    .replace(/\b(?:the )?day after tomorrow\b/gi, '')
    .replace(/\b(?:tomorrow|today|tonight)(?: (?:morning|afternoon|evening|night))?\b/gi, '')
    .replace(/\bthis (?:morning|afternoon|evening)\b/gi, '')
    .replace(new RegExp(`\\b(?:on |this |next |coming )?${WEEKDAY_RE}(?: (?:morning|afternoon|evening|night))?\\b`, 'gi'), '')
    .replace(new RegExp(`\\b(?:on )?${MONTH_RE}\\.? \\d{1,2}(?:st|nd|rd|th)?\\b`, 'gi'), '')
    .replace(new RegExp(`\\b(?:on )?(?:the )?\\d{1,2}(?:st|nd|rd|th)?(?: of)? ${MONTH_RE}\\b`, 'gi'), '')
    .replace(/\b(?:at |by |around |from )?\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?)(?=\W|$)/gi, '')
    .replace(/\b(?:at |by |around )?(?:[01]?\d|2[0-3]):[0-5]\d\b/g, '')
    .replace(/\b(?:at |by )?(?:noon|midday|midnight)\b/gi, '')
    .replace(/\bat \d{1,2}(?: o'clock)?\b/gi, '')
    .replace(/\bnext week\b/gi, '')
    .replace(/\bin (?:\d{1,3}|an?|half an) (?:minutes?|mins?|hours?)\b/gi, '')
    .replace(/\s+([,.!?])/g, '$1')
    .replace(/\s{2,}/g, ' ')
    .trim();
}
