// speaker_assigned over the live socket: later segments carry the person, named stored segments are updated and re-sent.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { open, sendAndStep } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';

const suggested = (segments: object[]): string => JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments });
const assigned = (m: object): string => JSON.stringify({ type: 'speaker_assigned', ...m });

const send = sendAndStep;

t.test('speaker_assigned: later segments, device owner, stored segments updated and re-sent, invalid ignored', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;

  const [first] = await send(ts, c, actor, suggested([{ text: 'Hi, I am Ana.', speaker: 'SPEAKER_01', start: 0, end: 1.5 }]));
  t.match(first, { speaker_id: 1, person_id: null, is_user: false });
  const convId = actor.conversationId!;

  // Speaker 1 → a person, naming the stored segment: it is updated in the store and re-sent.
  const resent = await send(ts, c, actor, assigned({ speaker_id: 1, person_id: 'p-ana', person_name: 'Ana', segment_ids: [first.id] }));
  t.same(resent.map((s) => [s.id, s.person_id, s.is_user]), [[first.id, 'p-ana', false]], 'the named stored segment is re-sent with the person');
  const stored = await ts.service.services.conversations.segments(convId);
  t.match(stored, [{ id: first.id, personId: 'p-ana', isUser: false }], 'updated in the store');

  // Later segments of SPEAKER_01 carry the person.
  const [later] = await send(ts, c, actor, suggested([{ text: 'Nice to meet you.', speaker: 'SPEAKER_01', start: 10, end: 11 }]));
  t.match(later, { speaker: 'SPEAKER_01', person_id: 'p-ana', is_user: false });
  t.not(later.id, first.id);

  // person_id "user" → is_user, no person id.
  c.ws.send(assigned({ speaker_id: 2, person_id: 'user', person_name: 'Me', segment_ids: [] }));
  await until(() => actor.stats.speakerAssignments === 2, { what: 'assignment received' });
  const [mine] = await send(ts, c, actor, suggested([{ text: 'Likewise.', speaker: 'SPEAKER_02', start: 20, end: 21 }]));
  t.match(mine, { speaker_id: 2, is_user: true, person_id: null });

  // Invalid messages change nothing and are counted; the session goes on.
  for (const bad of [{ speaker_id: 1, person_id: 'p-bob', segment_ids: [first.id] }, { speaker_id: -1, person_id: 'p-bob', person_name: 'Bob' }, { speaker_id: 1, person_id: '', person_name: 'Bob' }, { speaker_id: 1, person_id: 'p-bob', person_name: 'Bob', segment_ids: 'x' }]) {
    c.ws.send(assigned(bad));
  }
  await until(() => actor.stats.invalidSpeakerAssignments === 4, { what: 'invalid assignments counted' });
  const [again] = await send(ts, c, actor, suggested([{ text: 'Ana again here.', speaker: 'SPEAKER_01', start: 30, end: 31 }]));
  t.match(again, { person_id: 'p-ana' }, 'speaker 1 still maps to Ana');

  // Reassigning the first stored segment to the device owner: readable through the developer API.
  const [owner] = await send(ts, c, actor, assigned({ speaker_id: 3, person_id: 'user', person_name: 'Me', segment_ids: [first.id, 'no-such-segment'] }));
  t.match(owner, { id: first.id, is_user: true, person_id: null });
  const res = await ts.req(`/v1/dev/user/conversations/${convId}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 200);
  t.match(res.json.transcript_segments[0], { id: first.id, speaker_name: 'User' }, 'the stored segment reads back as the owner');
  t.match((await ts.service.services.conversations.segments(convId))[0], { isUser: true, personId: null });
  t.equal(actor.state, 'streaming');
  c.close();
  await until(() => ts.service.sessions.size === 0, { what: 'session closed' });
});
