// SpeakerAssignments: speaker_assigned validation and how the maps are applied to segments.
import t from 'tap';
import { SpeakerAssignments, SPEAKER_ASSIGNED_ERROR, parseSpeakerAssigned } from '../../../engine/audio/speakers.js';
import type { TranscriptSegment } from '../../../engine/audio/segment.js';

function seg(id: string, speakerId: number, extra: Partial<TranscriptSegment> = {}): TranscriptSegment {
  return {
    id,
    text: 'hi',
    speaker: `SPEAKER_0${speakerId}`,
    speakerId,
    isUser: false,
    personId: null,
    start: 0,
    end: 1,
    speechProfileProcessed: true,
    sttProvider: 'provider_a',
    ...extra,
  };
}

const valid = { type: 'speaker_assigned', speaker_id: 1, person_id: 'p-1', person_name: 'Ana', segment_ids: ['s-1'] };

const invalid: [string, unknown, string, string][] = [
  ['not an object', 'hello', SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type'],
  ['null', null, SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type'],
  ['an array', [valid], SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type'],
  ['wrong type', { ...valid, type: 'image_chunk' }, SPEAKER_ASSIGNED_ERROR.NOT_A_MESSAGE, 'type'],
  ['speaker_id missing', { ...valid, speaker_id: undefined }, SPEAKER_ASSIGNED_ERROR.FIELD_MISSING, 'speaker_id'],
  ['person_id missing', { ...valid, person_id: undefined }, SPEAKER_ASSIGNED_ERROR.FIELD_MISSING, 'person_id'],
  ['person_name null', { ...valid, person_name: null }, SPEAKER_ASSIGNED_ERROR.FIELD_MISSING, 'person_name'],
  ['speaker_id a string', { ...valid, speaker_id: '1' }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'speaker_id'],
  ['speaker_id fractional', { ...valid, speaker_id: 1.5 }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'speaker_id'],
  ['speaker_id negative', { ...valid, speaker_id: -1 }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'speaker_id'],
  ['speaker_id boolean', { ...valid, speaker_id: true }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'speaker_id'],
  ['person_id a number', { ...valid, person_id: 7 }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'person_id'],
  ['person_id empty', { ...valid, person_id: '' }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'person_id'],
  ['person_name a number', { ...valid, person_name: 3 }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'person_name'],
  ['segment_ids a string', { ...valid, segment_ids: 's-1' }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'segment_ids'],
  ['segment_ids with a number', { ...valid, segment_ids: ['s-1', 2] }, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID, 'segment_ids'],
];

for (const [name, raw, code, field] of invalid) {
  t.test(`refused: ${name}`, async (t) => {
    const a = new SpeakerAssignments();
    const r = a.assign(raw);
    t.same(r, { ok: false, error: { code, field } });
    t.equal(a.forSpeaker(1), undefined, 'maps untouched');
  });
}

t.test('too many segment ids in one message are refused', async (t) => {
  const a = new SpeakerAssignments({ maxSegmentIdsPerMessage: 2 });
  const r = a.assign({ ...valid, segment_ids: ['a', 'b', 'c'] });
  t.equal(r.ok ? undefined : r.error.code, SPEAKER_ASSIGNED_ERROR.FIELD_INVALID);
});

t.test('segment_ids may be absent or empty', async (t) => {
  const r = parseSpeakerAssigned({ ...valid, segment_ids: undefined });
  t.same(r, { ok: true, message: { speakerId: 1, personId: 'p-1', personName: 'Ana', segmentIds: [] } });
  t.ok(new SpeakerAssignments().assign({ ...valid, segment_ids: [] }).ok);
});

t.test('a person assignment maps the speaker and the segments', async (t) => {
  const a = new SpeakerAssignments();
  t.ok(a.assign(valid).ok);
  t.same(a.forSpeaker(1), { personId: 'p-1', personName: 'Ana', isUser: false });
  t.same(a.forSegment('s-1'), { personId: 'p-1', personName: 'Ana', isUser: false });
  const later = seg('s-9', 1);
  const applied = a.apply(later);
  t.equal(applied.personId, 'p-1');
  t.equal(applied.isUser, false);
  t.equal(later.personId, null, 'input not mutated');
  t.same(a.apply(seg('s-2', 2)), seg('s-2', 2), 'other speakers unchanged');
});

t.test('person_id "user" marks the device owner', async (t) => {
  const a = new SpeakerAssignments();
  t.ok(a.assign({ ...valid, speaker_id: 0, person_id: 'user', person_name: 'Me' }).ok);
  t.same(a.forSpeaker(0), { personId: null, personName: 'Me', isUser: true });
  const s = a.apply(seg('x', 0, { personId: 'stale' }));
  t.equal(s.isUser, true);
  t.equal(s.personId, null);
});

t.test('a segment assignment wins over its speaker assignment', async (t) => {
  const a = new SpeakerAssignments();
  a.assign({ ...valid, speaker_id: 1, person_id: 'p-1', segment_ids: [] });
  a.assign({ ...valid, speaker_id: 2, person_id: 'user', segment_ids: ['s-7'] });
  const s = a.apply(seg('s-7', 1));
  t.equal(s.isUser, true, 'the segment-level assignment is applied');
  t.equal(s.personId, null);
  t.equal(a.apply(seg('s-8', 1)).personId, 'p-1');
});

t.test('a later assignment overwrites an earlier one', async (t) => {
  const a = new SpeakerAssignments();
  a.assign(valid);
  a.assign({ ...valid, person_id: 'p-2', person_name: 'Bo' });
  t.equal(a.forSpeaker(1)?.personId, 'p-2');
  t.equal(a.forSegment('s-1')?.personName, 'Bo');
});

t.test('the segment map is bounded; the least recently assigned go first', async (t) => {
  const a = new SpeakerAssignments({ maxSegmentAssignments: 2 });
  a.assign({ ...valid, segment_ids: ['a', 'b'] });
  a.assign({ ...valid, segment_ids: ['a'] });
  a.assign({ ...valid, segment_ids: ['c'] });
  t.equal(a.forSegment('b'), undefined);
  t.ok(a.forSegment('a'));
  t.ok(a.forSegment('c'));
});
