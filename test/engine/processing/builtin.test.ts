// The built-in extractor on a table of transcripts: what a user would notice in the title, category, tasks, events and memories.
import t, { type Test } from 'tap';
import { BuiltinProcessor, processBuiltin } from '../../../engine/processing/builtin.js';
import { resolveWhen, parseDurationMinutes } from '../../../engine/processing/when.js';
import { CONVERSATION_CATEGORIES, MEMORY_CATEGORIES, type ProcessInput, type ProcessResult } from '../../../engine/processing/types.js';

// Monday 23 November 2026, 12:00 UTC.
const STARTED = '2026-11-23T12:00:00.000Z';

function input(text: string, over: Partial<ProcessInput> = {}): ProcessInput {
  return { segments: [{ text, start: 0, end: 30 }], textSource: 'audio_transcript', language: 'en', startedAt: STARTED, finishedAt: '2026-11-23T12:05:00.000Z', allowDiscard: true, ...over };
}

interface Case {
  name: string;
  text: string;
  category?: string;
  /** Words the title must contain (case-insensitive). */
  titleHas?: string[];
  actions?: Array<{ has: string; dueAt?: string | null }>;
  events?: Array<{ titleHas: string; start: string; duration?: number }>;
  memories?: Array<{ has: string; category: string }>;
  noActions?: boolean;
  noEvents?: boolean;
  noMemories?: boolean;
}

const CASES: Case[] = [
  {
    name: 'reminder with a due time and a task by Friday',
    text: 'Remind me to call the dentist tomorrow at 3pm. I also need to finish the quarterly budget report by Friday.',
    titleHas: ['Budget', 'Report'],
    category: 'work',
    actions: [{ has: 'Call the dentist', dueAt: '2026-11-24T15:00:00.000Z' }, { has: 'finish the quarterly budget report', dueAt: '2026-11-27T09:00:00.000Z' }],
    noEvents: true,
  },
  {
    name: 'team meeting with a duration, and a "let\'s" task',
    text: "We have a team meeting on Monday at 10 for an hour to review the product launch. Let's send the slides to the client.",
    titleHas: ['Team Meeting'],
    category: 'work',
    actions: [{ has: 'Send the slides to the client', dueAt: null }],
    events: [{ titleHas: 'Team Meeting', start: '2026-11-30T10:00:00.000Z', duration: 60 }],
  },
  {
    name: 'travel on a month day at 24-hour time',
    text: "The flight to Lisbon is on March 3rd at 14:30. Don't forget to renew the passport and book the hotel.",
    category: 'travel',
    actions: [{ has: 'Renew the passport' }],
    events: [{ titleHas: 'Flight to Lisbon', start: '2027-03-03T14:30:00.000Z', duration: 30 }],
  },
  {
    name: 'first-person facts become memories',
    text: 'I love hiking in the mountains. My favorite color is blue. I work at Acme Corp as a software engineer. I live in Berlin.',
    memories: [
      { has: 'User loves hiking', category: 'hobbies' },
      { has: "User's favorite color is blue", category: 'interests' },
      { has: 'User works at Acme Corp', category: 'work' },
      { has: 'User lives in Berlin', category: 'core' },
    ],
    noActions: true,
    noEvents: true,
  },
  {
    name: 'profession and allergy',
    text: "I'm a nurse and I am allergic to peanuts. I hate cilantro.",
    memories: [
      { has: 'User is a nurse', category: 'work' },
      { has: 'User is allergic to peanuts', category: 'lifestyle' },
      { has: 'User hates cilantro', category: 'interests' },
    ],
  },
  {
    name: 'habit',
    text: 'I usually go running every morning before work. My doctor said my blood pressure is fine.',
    category: 'health',
    memories: [{ has: 'User usually goes running every morning', category: 'habits' }, { has: "User's blood pressure is fine", category: 'core' }],
  },
  {
    name: 'sports chat has no tasks',
    text: 'Can you believe the Lakers lost again? The game went to overtime and the coach was furious. Our team needs a better defense this season, the league is tough.',
    category: 'sports',
    titleHas: ['Defense'],
    noActions: true,
    noEvents: true,
    noMemories: true,
  },
  {
    name: 'lunch next Monday',
    text: "Let's meet for lunch next Monday with Sarah to talk about the startup pitch for investors.",
    category: 'entrepreneurship',
    titleHas: ['Lunch', 'Sarah'],
    events: [{ titleHas: 'Lunch', start: '2026-11-30T09:00:00.000Z' }],
  },
  {
    name: 'imperatives',
    text: 'Buy milk and eggs on the way home. Email Tom the contract draft. Pay the electricity bill.',
    actions: [{ has: 'Buy milk and eggs' }, { has: 'Email Tom the contract draft' }, { has: 'Pay the electricity bill' }],
  },
  {
    name: 'duplicate tasks are merged',
    text: "We should update the website. We should update the website! Don't forget to water the plants.",
    actions: [{ has: 'Update the website' }, { has: 'Water the plants' }],
    category: 'technology',
  },
  {
    name: 'a clock time alone is the next such time',
    text: 'The standup with the design team is at 9:15 and the client demo is at 14:30.',
    events: [{ titleHas: 'Standup', start: '2026-11-24T09:15:00.000Z' }],
  },
  {
    name: 'finance',
    text: 'I need to move some savings into the index fund. The mortgage payment and the tax bill are due, so the budget is tight this month.',
    category: 'finance',
    actions: [{ has: 'Move some savings' }],
  },
  {
    name: 'family and a dinner event tonight',
    text: 'Dinner with mom and dad tonight at 7pm for two hours at their place. My sister is flying in from Chicago.',
    category: 'family',
    events: [{ titleHas: 'Dinner', start: '2026-11-23T19:00:00.000Z', duration: 120 }],
  },
  {
    name: 'education',
    text: 'The chemistry exam is on Friday morning, so I have to study the lecture notes and finish the homework for the professor.',
    category: 'education',
    events: [{ titleHas: 'Chemistry Exam', start: '2026-11-27T09:00:00.000Z' }],
    actions: [{ has: 'Study the lecture notes' }],
  },
  {
    name: 'technology',
    text: 'The deploy failed because the database server ran out of disk. We need to fix the backend bug before the API goes live.',
    category: 'technology',
    actions: [{ has: 'Fix the backend bug' }],
  },
  {
    name: 'weather, nothing to do',
    text: 'The forecast says heavy rain and a storm all weekend, the temperature will drop and it might even snow in the mountains.',
    category: 'weather',
    noActions: true,
    noMemories: true,
  },
  {
    name: 'a sentence without any keywords falls back to other',
    text: 'The blue kettle sits beside the old wooden chair near the window overlooking quiet gardens.',
    category: 'other',
  },
];

function check(t: Test, c: Case, r: ProcessResult): void {
  const s = r.structured;
  t.equal(r.discarded, false, 'kept');
  t.equal(r.producedBy, 'builtin');
  t.ok(s.title.length > 0, 'has a title');
  t.ok(s.title.split(/\s+/).length <= 10, `title of at most 10 words: ${s.title}`);
  t.ok(s.title.split(/\s+/).every((w) => !/^[a-z]/.test(w) || ['a', 'an', 'the', 'and', 'of', 'to', 'in', 'on', 'for', 'with', 'at', 'by', 'from', 'or', 'as', 'but', 'so', 'up'].includes(w)), `Title Case: ${s.title}`);
  t.ok(s.overview.length > 0 && s.overview.length <= 600, 'has an overview');
  t.ok((CONVERSATION_CATEGORIES as readonly string[]).includes(s.category), 'category from the enumeration');
  t.ok([...s.emoji].length >= 1 && s.emoji.length <= 16 && s.emoji !== '🧠', 'one emoji chosen from the category');
  if (c.category) t.equal(s.category, c.category, 'category');
  for (const w of c.titleHas ?? []) t.match(s.title.toLowerCase(), w.toLowerCase(), `title mentions ${w}`);
  for (const a of c.actions ?? []) {
    const item = s.actionItems.find((x) => x.description.toLowerCase().includes(a.has.toLowerCase()));
    t.ok(item, `action item "${a.has}" in ${JSON.stringify(s.actionItems.map((x) => x.description))}`);
    if (item && a.dueAt !== undefined) t.equal(item.dueAt, a.dueAt, `due time of "${a.has}"`);
  }
  if (c.actions) t.equal(s.actionItems.length, c.actions.length, 'no extra action items');
  for (const item of s.actionItems) t.ok(item.description.split(/\s+/).length <= 15, 'action item of at most 15 words');
  for (const e of c.events ?? []) {
    const ev = s.events.find((x) => x.title.toLowerCase().includes(e.titleHas.toLowerCase()));
    t.ok(ev, `event "${e.titleHas}" in ${JSON.stringify(s.events.map((x) => x.title))}`);
    if (ev) {
      t.equal(ev.start, e.start, `start of "${e.titleHas}"`);
      t.equal(ev.duration, e.duration ?? 30, 'duration');
    }
  }
  for (const m of c.memories ?? []) {
    const mem = r.memories.find((x) => x.content.toLowerCase().includes(m.has.toLowerCase()));
    t.ok(mem, `memory "${m.has}" in ${JSON.stringify(r.memories.map((x) => x.content))}`);
    if (mem) t.equal(mem.category, m.category, `memory category of "${m.has}"`);
  }
  for (const m of r.memories) {
    t.ok(m.content.length >= 1 && m.content.length <= 500, 'memory of 1–500 characters');
    t.ok((MEMORY_CATEGORIES as readonly string[]).includes(m.category), 'memory category from the enumeration');
  }
  if (c.noActions) t.same(s.actionItems, [], 'no action items');
  if (c.noEvents) t.same(s.events, [], 'no events');
  if (c.noMemories) t.same(r.memories, [], 'no memories');
}

t.test('the extraction table', async (t) => {
  t.ok(CASES.length >= 15);
  for (const c of CASES) {
    await t.test(c.name, async (t) => check(t, c, await new BuiltinProcessor().process(input(c.text))));
  }
});

t.test('discard rules', async (t) => {
  const discard = (text: string, over: Partial<ProcessInput> = {}) => processBuiltin(input(text, over));
  for (const text of ['', '   ', 'Hi. Hello, how are you? Good, thanks.', 'Okay so yeah. Um, see you later, bye.', 'Testing, testing, one two three, can you hear me?', 'uh huh. yeah. mhm.']) {
    const r = discard(text);
    t.equal(r.discarded, true, `discarded: "${text}"`);
    t.same(r.structured, { title: '', overview: '', emoji: '🧠', category: 'other', actionItems: [], events: [] }, 'empty structure with the brain emoji');
    t.same(r.memories, []);
  }
  t.equal(discard('').discarded, true, 'no transcript is discarded');
  t.equal(discard('Remind me to buy milk.').discarded, false, 'a short task is kept');
  t.equal(discard('I live in Lisbon with my two cats.').discarded, false, 'a short personal fact is kept');
  const long = Array.from({ length: 110 }, () => 'yeah').join(' ');
  t.equal(discard(long).discarded, false, 'more than 100 words is always kept');
  t.equal(discard('Hi. Hello, how are you?', { allowDiscard: false }).discarded, false, 'external text is never discarded');
  const kept = discard('Hi.', { allowDiscard: false });
  t.ok(kept.structured.title.length > 0, 'a kept short text still has a title');
  t.equal(discard('hello').structured.emoji, '🧠');
});

t.test('several segments are one transcript', async (t) => {
  const r = processBuiltin(input('', { segments: [{ text: 'We need to book the venue for the wedding.', start: 0, end: 3, isUser: true }, { text: 'And send the invitations next week.', start: 3, end: 6 }] }));
  t.equal(r.discarded, false);
  t.ok(r.structured.actionItems.some((a) => /book the venue/i.test(a.description)));
});

t.test('date and duration phrases', async (t) => {
  const at = (s: string) => resolveWhen(s, STARTED)?.start;
  t.equal(at('tomorrow at 3pm'), '2026-11-24T15:00:00.000Z');
  t.equal(at('on Friday at 10'), '2026-11-27T10:00:00.000Z');
  t.equal(at('next Monday'), '2026-11-30T09:00:00.000Z');
  t.equal(at('at 14:30'), '2026-11-23T14:30:00.000Z', 'later today');
  t.equal(at('at 11:00'), '2026-11-24T11:00:00.000Z', 'already past today: tomorrow');
  t.equal(at('on March 3rd'), '2027-03-03T09:00:00.000Z', 'a past month day is next year');
  t.equal(at('on December 5th at 8:45 am'), '2026-12-05T08:45:00.000Z');
  t.equal(at('in 2 hours'), '2026-11-23T14:00:00.000Z');
  t.equal(at('tomorrow at noon'), '2026-11-24T12:00:00.000Z');
  t.equal(at('nothing about time'), undefined);
  t.equal(parseDurationMinutes('for an hour'), 60);
  t.equal(parseDurationMinutes('for 45 minutes'), 45);
  t.equal(parseDurationMinutes('for an hour and a half'), 90);
  t.equal(parseDurationMinutes('for 2 hours'), 120);
  t.equal(parseDurationMinutes('no duration'), undefined);
});

t.test('the processor honours an aborted signal', async (t) => {
  const ac = new AbortController();
  ac.abort();
  await t.rejects(new BuiltinProcessor().process(input('Remind me to buy milk.'), ac.signal));
});
