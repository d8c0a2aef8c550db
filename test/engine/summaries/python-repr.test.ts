// The legacy `summary` string against texts written out by hand as Python's str() prints them.
import t from 'tap';
import { PyFloat, pyFloat, pyRepr, pyStr } from '../../../engine/summaries/python-repr.js';
import { daySummaryBody, pushBody } from '../../../engine/summaries/day-summary.js';
import type { SummaryJson } from '../../../engine/db/daily-summaries.js';

t.test('strings: quotes chosen and escaped as Python does', async (t) => {
  t.equal(pyStr('plain'), "'plain'");
  t.equal(pyStr(''), "''");
  t.equal(pyStr("it's"), `"it's"`, 'a single quote and no double quote: double quotes');
  t.equal(pyStr('say "hi"'), `'say "hi"'`);
  t.equal(pyStr(`it's "both"`), `'it\\'s "both"'`, 'both quotes: single quotes, the single one escaped');
  t.equal(pyStr('a\\b'), "'a\\\\b'", 'a backslash doubled');
  t.equal(pyStr('line1\nline2\ttab\rcr'), "'line1\\nline2\\ttab\\rcr'");
  t.equal(pyStr('bell\x07 del\x7f nul\x00'), "'bell\\x07 del\\x7f nul\\x00'");
  t.equal(pyStr('café – naïve 日本語 🎉'), "'café – naïve 日本語 🎉'", 'printable non-ASCII as is');
  t.equal(pyStr('nbsp\u00a0zwsp\u200b ls\u2028'), "'nbsp\\xa0zwsp\\u200b ls\\u2028'", 'non-printable escaped by width');
  t.equal(pyStr('\u{e0001}'), "'\\U000e0001'");
});

t.test('numbers, booleans, None, lists and dicts', async (t) => {
  t.equal(pyRepr(1), '1');
  t.equal(pyRepr(-42), '-42');
  t.equal(pyRepr(0.1), '0.1');
  t.equal(pyRepr(new PyFloat(1)), '1.0');
  t.equal(pyRepr(new PyFloat(48.8566)), '48.8566');
  t.equal(pyRepr(new PyFloat(-0)), '-0.0');
  t.equal(pyFloat(1e16), '1e+16');
  t.equal(pyFloat(123456789012345.0), '123456789012345.0');
  t.equal(pyFloat(0.0001), '0.0001');
  t.equal(pyFloat(0.00001), '1e-05');
  t.equal(pyFloat(1.5e-7), '1.5e-07');
  t.equal(pyFloat(2.5e20), '2.5e+20');
  t.equal(pyFloat(0.1 + 0.2), '0.30000000000000004');
  t.equal(pyRepr(true), 'True');
  t.equal(pyRepr(false), 'False');
  t.equal(pyRepr(null), 'None');
  t.equal(pyRepr([]), '[]');
  t.equal(pyRepr({}), '{}');
  t.equal(pyRepr({ a: [1, 'two', { b: null, c: [true, false] }], "d'e": 0.5 }), `{'a': [1, 'two', {'b': None, 'c': [True, False]}], "d'e": 0.5}`);
});

t.test('a whole day_summary body: summary is summary_json in Python syntax, created_at with +00:00', async (t) => {
  const s: SummaryJson = {
    id: 'S1',
    date: '2026-03-08',
    created_at: '2026-03-09T03:00:00.000',
    headline: "Max's day",
    overview: 'Café talk\nthen "work"',
    day_emoji: '☕',
    stats: { total_conversations: 2, total_duration_minutes: 35, action_items_count: 1 },
    highlights: [{ topic: 'Coffee', emoji: '☕', summary: 'Met Anna', conversation_ids: ['c1', 'c2'] }],
    action_items: [{ description: 'Call the dentist', priority: 'high', completed: false, source_conversation_id: 'c1' }],
    unresolved_questions: [{ question: 'Who pays?', conversation_id: 'c2' }],
    decisions_made: [],
    knowledge_nuggets: [{ insight: 'Anna is back\\home', conversation_id: 'c1' }],
    locations: [{ name: 'Zürich', latitude: 47, longitude: 8.5417, time: '09:05' }],
  };
  const body = daySummaryBody('u1', s, Date.UTC(2026, 2, 9, 3, 0, 0, 250));
  t.same(Object.keys(body), ['uid', 'created_at', 'summary_json', 'summary']);
  t.equal(body.created_at, '2026-03-09T03:00:00.250+00:00');
  t.same(body.summary_json, s);
  const expected =
    `{'id': 'S1', 'date': '2026-03-08', 'created_at': '2026-03-09T03:00:00.000', 'headline': "Max's day"` +
    ", 'overview': 'Café talk\\nthen \"work\"', 'day_emoji': '☕', " +
    "'stats': {'total_conversations': 2, 'total_duration_minutes': 35, 'action_items_count': 1}, " +
    "'highlights': [{'topic': 'Coffee', 'emoji': '☕', 'summary': 'Met Anna', 'conversation_ids': ['c1', 'c2']}], " +
    "'action_items': [{'description': 'Call the dentist', 'priority': 'high', 'completed': False, 'source_conversation_id': 'c1'}], " +
    "'unresolved_questions': [{'question': 'Who pays?', 'conversation_id': 'c2'}], " +
    "'decisions_made': [], " +
    "'knowledge_nuggets': [{'insight': 'Anna is back\\\\home', 'conversation_id': 'c1'}], " +
    "'locations': [{'name': 'Zürich', 'latitude': 47.0, 'longitude': 8.5417, 'time': '09:05'}]}";
  t.equal(body.summary, expected);
});

t.test('the push body: the overview, cut at 150 characters with "..."', async (t) => {
  t.equal(pushBody('short'), 'short');
  t.equal(pushBody('x'.repeat(150)), 'x'.repeat(150));
  t.equal(pushBody('y'.repeat(151)), 'y'.repeat(147) + '...');
});
