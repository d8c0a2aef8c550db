// Answers of the custom transcription server: {segments:[…]} objects only; raw arrays refused, foreign `type` ignored.
import t from 'tap';
import { parseCustomAnswer } from '../../../../engine/stt/custom/answers.js';

t.test('an object with a segments array is a result; Results is the only type allowed', async (t) => {
  t.same(parseCustomAnswer('{"segments":[{"text":"hi","speaker":"SPEAKER_01","start":0.5,"end":1.25}]}'), {
    kind: 'results',
    segments: [{ text: 'hi', speaker: 'SPEAKER_01', start: 0.5, end: 1.25 }],
    invalid: 0,
  });
  t.same(parseCustomAnswer('{"type":"Results","segments":[{"text":"hi"}]}'), { kind: 'results', segments: [{ text: 'hi' }], invalid: 0 });
  t.same(parseCustomAnswer('{"segments":[]}'), { kind: 'results', segments: [], invalid: 0 });
  t.same(parseCustomAnswer('{"segments":[{"text":"a","speaker":null,"start":null}]}'), { kind: 'results', segments: [{ text: 'a' }], invalid: 0 }, 'null means absent');
});

t.test('refused and ignored answers', async (t) => {
  const cases: [string, unknown][] = [
    ['[{"text":"hi"}]', { kind: 'rejected', reason: 'raw_array' }],
    ['[]', { kind: 'rejected', reason: 'raw_array' }],
    ['{"segments":', { kind: 'rejected', reason: 'malformed_json' }],
    ['', { kind: 'rejected', reason: 'malformed_json' }],
    ['"text"', { kind: 'rejected', reason: 'not_an_object' }],
    ['null', { kind: 'rejected', reason: 'not_an_object' }],
    ['{"segments":{"text":"hi"}}', { kind: 'rejected', reason: 'no_segments' }],
    ['{}', { kind: 'rejected', reason: 'no_segments' }],
    ['{"type":"Metadata","segments":[{"text":"hi"}]}', { kind: 'ignored' }],
    ['{"type":"results","segments":[{"text":"hi"}]}', { kind: 'ignored' }],
    ['{"type":null,"segments":[{"text":"hi"}]}', { kind: 'ignored' }],
  ];
  for (const [text, expected] of cases) t.same(parseCustomAnswer(text), expected, text || '(empty)');
});

t.test('invalid segments are dropped and counted', async (t) => {
  const r = parseCustomAnswer(
    JSON.stringify({
      segments: [
        { text: 'ok' },
        { text: 1 },
        {},
        'text',
        ['text'],
        { text: 'x', speaker: 7 },
        { text: 'x', speaker: '' },
        { text: 'x', speaker: 'S'.repeat(65) },
        { text: 'x', start: '0' },
        { text: 'x', end: -0.1 },
        { text: 'also ok', start: 0, end: 0 },
      ],
    }),
  );
  t.same(r, { kind: 'results', segments: [{ text: 'ok' }, { text: 'also ok', start: 0, end: 0 }], invalid: 9 });
});
