// Conversation lifecycle over the live socket: suggested transcripts, silence timeout → job → memory_created, manual end, resume.
import t from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, sendAndStep, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { ConversationStatus } from '../../../engine/protocol.js';

const suggested = (segments: object[]): string => JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments });
const LINES = [
  { text: 'I need to call the dentist tomorrow morning about my appointment.', speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start: 0, end: 3.5 },
  { text: 'Remember to buy milk and bread on the way home.', speaker: 'SPEAKER_01', speaker_id: 1, is_user: false, person_id: null, start: 4, end: 7 },
];

const say = (ts: TestService, c: ListenClient, segments: object[]): Promise<any[]> => sendAndStep(ts, c, ts.service.sessions.sessionsOf('u1')[0]!, suggested(segments));

t.test('custom_stt: suggested transcripts, silence timeout, processing job, memory_created', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled', conversation_timeout: '30', source: 'phone' });
  await c.ready();
  const sent = await say(ts, c, LINES);
  t.same(sent.map((s) => s.text), LINES.map((l) => l.text), 'suggested segments come back as the bare array');
  t.equal(sent[0].stt_provider, 'app', 'stt_provider from the message');
  t.equal(sent[0].is_user, true);
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const id = actor.conversationId!;

  await advance(ts, 29_000);
  t.equal(actor.conversationId, id, 'still in progress before the timeout');
  await advance(ts, 1_000);
  const started = await c.json((m) => m.type === 'memory_processing_started');
  t.equal(started.memory.id, id, 'memory_processing_started for the conversation');
  t.equal(actor.state, 'processing', 'session in PROCESSING');
  t.equal(actor.conversationId, undefined, 'the session let the conversation go');
  const created = await c.json((m) => m.type === 'memory_created', 20_000);
  t.equal(created.memory.id, id);
  t.equal(created.memory.status, 'completed');
  t.ok(created.memory.structured.title.length > 0, 'structured title');
  t.same(created.messages, []);
  const res = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 200);
  t.same(res.json.transcript_segments.map((s: { text: string }) => s.text), LINES.map((l) => l.text), 'transcript readable through the developer API');
  t.equal(res.json.source, 'phone');

  // The session goes on into a new conversation.
  const more = await say(ts, c, [{ text: 'A new topic starts here.', speaker: 'SPEAKER_00', start: 0, end: 1 }]);
  t.equal(more.length, 1);
  t.equal(actor.state, 'streaming', 'back to STREAMING');
  t.not(actor.conversationId, id, 'a new conversation');

  // suggested_transcript is ignored when custom_stt is disabled.
  const d = await open(ts, { uid: 'u2' });
  await d.ready();
  d.ws.send(suggested(LINES));
  const other = ts.service.sessions.sessionsOf('u2')[0]!;
  await until(() => other.stats.textMessages === 1, { what: 'message received' });
  await advance(ts, 600);
  t.equal(other.conversationId, undefined, 'ignored without custom_stt');
  c.close();
  d.close();
  await until(() => ts.service.sessions.size === 0, { what: 'sessions closed' });
});

t.test('POST /v1/conversations ends the in-progress conversation; a reconnect resumes it', async (t) => {
  const ts = await startService(t);
  const auth = bearer(await ts.token('u1'));
  t.equal((await ts.req('/v1/conversations', { method: 'POST', headers: auth, body: {} })).status, 404, '404 without an in-progress conversation');

  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  await say(ts, c, [LINES[0]!]);
  const first = ts.service.sessions.sessionsOf('u1')[0]!.conversationId!;
  c.close();
  await until(() => ts.service.sessions.size === 0, { what: 'first session closed' });
  const queued = async (state: string): Promise<number> => Number(new RegExp(`^jobs_queued\\{queue="processing",state="${state}"\\} (\\d+)$`, 'm').exec((await ts.req('/metrics')).text)?.[1]);
  t.equal(await queued('delayed'), 1, "/metrics: the conversation's idle check waits on the processing queue");

  // Reconnect within the timeout: same conversation, times continue from its start.
  await advance(ts, 5_000);
  const c2 = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c2.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  t.equal(actor.conversationId, first, 'resumed the in-progress conversation');
  // Another speaker, so the merge rules keep it a segment of its own.
  const [seg] = await say(ts, c2, [{ text: 'Back again.', speaker: 'SPEAKER_01', start: 0, end: 1 }]);
  t.ok(seg.start >= 5, `segment time continues (${seg.start} s from the conversation start)`);
  const stored = await ts.req(`/v1/dev/user/conversations/${first}?include_transcript=true`, { headers: auth });
  t.same(stored.json.transcript_segments.map((s: { text: string }) => s.text), [LINES[0]!.text, 'Back again.']);

  const res = await ts.req('/v1/conversations', { method: 'POST', headers: auth, body: {} });
  t.equal(res.status, 200);
  t.equal(res.json.memory.id, first);
  t.equal(res.json.memory.status, 'processing');
  t.equal((await c2.json((m) => m.type === 'memory_processing_started')).memory.id, first, 'the live session hears it');
  t.equal((await c2.json((m) => m.type === 'memory_created', 20_000)).memory.id, first, 'and gets memory_created');
  t.equal(actor.conversationId, undefined, 'the session dropped the ended conversation');
  t.equal(actor.state, 'processing', 'PROCESSING until new audio');
  await until(async () => (await queued('waiting')) + (await queued('active')) === 0, { what: 'the processing job done on /metrics' });
  t.pass('/metrics: nothing of the processing queue waits or runs once the conversation is processed');
  await say(ts, c2, [{ text: 'Something new.', speaker: 'SPEAKER_00', start: 0, end: 1 }]);
  t.not(actor.conversationId, first, 'new audio opens a new conversation');
  t.equal((await ts.req('/v1/conversations', { method: 'POST', headers: { authorization: 'Bearer nope' }, body: {} })).status, 401);
  c2.close();
  await c2.closed;
});

t.test('a conversation without segments is deleted, not processed', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', conversation_timeout: '10' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  c.ws.send(new Uint8Array(320)); // 20 ms of pcm8 silence: audio, but the null engine transcribes nothing
  await until(() => actor.state === 'streaming', { what: 'audio received' });
  await advance(ts, 600);
  const id = actor.conversationId!;
  t.ok(id, 'first audio opened a conversation');
  await advance(ts, 10_000);
  t.equal(actor.conversationId, undefined, 'ended at the timeout');
  const res = await ts.req(`/v1/dev/user/conversations/${id}`, { headers: bearer(await ts.token('u1')) });
  t.equal(res.status, 404, 'deleted');
  c.close();
  await c.closed;
});

t.test('a conversation ended where this session did not hear of it: the next segments open a new one, the ended one is untouched', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const [first] = await say(ts, c, [LINES[0]!]);
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const ended = actor.conversationId!;
  // As another node's timeout would: the status moves, and no session event reaches this node.
  const conversations = ts.service.services.conversations;
  t.ok(await conversations.transition(ended, ConversationStatus.IN_PROGRESS, ConversationStatus.PROCESSING, ts.clock.now()), 'moved to processing behind the session');

  // Same speaker within 3 s: in the old conversation this would have merged into its tail.
  const [next] = await say(ts, c, [{ ...LINES[0]!, text: 'And one more thing.', start: 4, end: 5 }]);
  t.not(next.id, first.id, 'a segment of its own, not merged into the ended conversation');
  t.not(actor.conversationId, ended, 'the session moved on to a new conversation');
  t.same((await conversations.segments(ended)).map((s) => [s.id, s.text]), [[first.id, first.text]], 'the ended conversation was not written to');
  t.same((await conversations.segments(actor.conversationId!)).map((s) => s.text), ['And one more thing.']);
  t.equal((await conversations.getById(actor.conversationId!))?.status, 'in_progress');
  c.close();
  await c.closed;
});

t.test('a live conversation deleted through the developer API stays deleted: the next segments open a new one', async (t) => {
  const ts = await startService(t);
  const key = bearer(await ts.devKey('u1', ['conversations:read', 'conversations:write']));
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  const [first] = await say(ts, c, [LINES[0]!]);
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const deleted = actor.conversationId!;
  const del = await ts.req(`/v1/dev/user/conversations/${deleted}`, { method: 'DELETE', headers: key });
  t.same([del.status, del.json], [200, { success: true }], 'deleted while the session was writing to it');

  // Same speaker within 3 s: in the deleted conversation this would have merged into its tail.
  const [next] = await say(ts, c, [{ ...LINES[0]!, text: 'And one more thing.', start: 4, end: 5 }]);
  t.not(next.id, first.id, 'a segment of its own');
  t.not(actor.conversationId, deleted, 'the session moved on to a new conversation');
  t.equal((await ts.req(`/v1/dev/user/conversations/${deleted}`, { headers: key })).status, 404, 'the deleted conversation did not come back');
  const conversations = ts.service.services.conversations;
  t.same(await conversations.segments(deleted), [], 'no segment was written under the deleted id');
  const now = await ts.req(`/v1/dev/user/conversations/${actor.conversationId}?include_transcript=true`, { headers: key });
  t.same(now.json.transcript_segments.map((s: { text: string }) => s.text), ['And one more thing.']);
  c.close();
  await c.closed;
});

t.test('a conversation left in processing without a job is queued when ended again', async (t) => {
  const ts = await startService(t);
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await c.ready();
  await say(ts, c, LINES);
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const id = actor.conversationId!;
  c.close();
  await c.closed;
  const { conversations, lifecycle } = ts.service.services;
  // What a node that died between moving the status and queueing the job leaves: processing, and no job. (An
  // enqueue that fails undoes the move instead.)
  t.ok(await conversations.transition(id, ConversationStatus.IN_PROGRESS, ConversationStatus.PROCESSING, ts.clock.now()));
  t.equal(await lifecycle.end(id, 'u1'), 'processing', 'the caller tries again: the job is enqueued');
  t.equal(await lifecycle.end(id, 'u1'), 'processing', 'and again (the job id is the conversation id: not added twice)');
  await until(async () => (await conversations.getById(id))?.status === ConversationStatus.COMPLETED, { what: 'processed', timeoutMs: 20_000 });
  t.equal(await lifecycle.end(id, 'u1'), 'gone', 'a processed conversation is not processed again');
});
