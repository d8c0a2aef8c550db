// A conversation longer than the tail a session keeps in memory: the store holds every segment in order, the merge
// still joins onto the stored tail (also after a reconnect), and speaker_assigned reaches segments long out of memory.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, sendAndStep } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RECENT_SEGMENTS } from '../../../engine/audio/buffer-loop.js';

const suggested = (segments: object[]): string => JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments });

const send = sendAndStep;

/** Segments n..n+k-1, alternating speakers so no two merge (each is a whole sentence). */
const turns = (n: number, k: number, t0: number): object[] =>
  Array.from({ length: k }, (_, i) => ({ text: `Sentence number ${n + i}.`, speaker: `SPEAKER_0${(n + i) % 2}`, start: t0 + i * 5, end: t0 + i * 5 + 1 }));

t.test(`a conversation of more than ${RECENT_SEGMENTS} segments: stored whole and in order, merged at its tail, reassignable anywhere`, async (t) => {
  const ts = await startService(t);
  const auth = bearer(await ts.token('u1'));
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;

  const total = RECENT_SEGMENTS * 2 + 5;
  const sent: any[] = [];
  for (let n = 0; n < total; n += 10) sent.push(...(await send(ts, c, actor, suggested(turns(n, Math.min(10, total - n), n * 5)))));
  t.equal(sent.length, total, 'every sentence came back as a segment of its own');
  const convId = actor.conversationId!;
  const stored = await ts.service.services.conversations.segments(convId);
  t.same(stored.map((s) => s.text), sent.map((s) => s.text), 'the store holds the whole conversation in order');
  t.same(stored.map((s) => s.id), sent.map((s) => s.id));

  // The app names the very first segment, long out of the session's memory.
  const resent = await send(ts, c, actor, JSON.stringify({ type: 'speaker_assigned', speaker_id: 0, person_id: 'p-ana', person_name: 'Ana', segment_ids: [sent[0].id, sent[total - 1].id] }));
  t.same(resent.map((s) => [s.id, s.person_id]).sort(), [[sent[0].id, 'p-ana'], [sent[total - 1].id, 'p-ana']].sort(), 'both named segments re-sent with the person');
  const after = await ts.service.services.conversations.segments(convId);
  t.match(after[0], { id: sent[0].id, personId: 'p-ana', text: 'Sentence number 0.' }, 'the first stored segment updated');
  t.match(after[total - 1], { id: sent[total - 1].id, personId: 'p-ana' });
  t.equal(after.filter((s) => s.personId === 'p-ana').length, 2, 'no other segment touched');
  c.close();
  await until(() => ts.service.sessions.size === 0, { what: 'first session closed' });

  // Reconnect: the session resumes with the stored tail; a continuation joins the last segment and keeps its id.
  await advance(ts, 2_000);
  const c2 = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c2.ready();
  const actor2 = ts.service.sessions.sessionsOf('u1')[0]!;
  t.equal(actor2.conversationId, convId, 'resumed the conversation');
  const last = sent[total - 1];
  const [joined] = await send(ts, c2, actor2, suggested([{ text: 'and it goes on.', speaker: last.speaker, start: 0, end: 0.5 }]));
  t.equal(joined.id, last.id, 'the continuation merged into the stored tail');
  t.match(joined.text, /^Sentence number \d+\.? and it goes on\.$/);
  const [next] = await send(ts, c2, actor2, suggested([{ text: 'A new voice.', speaker: last.speaker === 'SPEAKER_00' ? 'SPEAKER_01' : 'SPEAKER_00', start: 20, end: 21 }]));
  const res = await ts.req(`/v1/dev/user/conversations/${convId}?include_transcript=true`, { headers: auth });
  t.equal(res.status, 200);
  const segs = res.json.transcript_segments as { id: string; text: string }[];
  t.equal(segs.length, total + 1, 'one segment more than before the reconnect');
  t.same(segs.slice(0, total - 1).map((s) => s.id), sent.slice(0, total - 1).map((s) => s.id), 'earlier segments untouched');
  t.same(segs.slice(-2).map((s) => [s.id, s.text]), [[last.id, joined.text], [next.id, 'A new voice.']]);
  c2.close();
  await until(() => ts.service.sessions.size === 0, { what: 'second session closed' });
});
