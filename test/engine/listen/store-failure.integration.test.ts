// A transcript write the store refuses loses nothing: segments and photos wait for the next 600 ms step, and a session
// whose client left tries its last write again for a while before it gives the segments up (counted and logged). The
// store fails for real: another connection holds sqlite's write lock past SQLITE_BUSY_TIMEOUT_MS.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, sendText, suggestedLine } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { sqliteWriteLock } from '../../helpers/sqlite-lock.js';

const counter = async (ts: TestService, name: string): Promise<number> => Number(new RegExp(`^${name} (\\S+)`, 'm').exec((await ts.req('/metrics')).text)?.[1]);

/** A service on a 50 ms sqlite busy timeout with one live session that has a conversation; and a lock on its store. */
async function setUp(t: Test) {
  const ts = await startService(t, { env: { SQLITE_BUSY_TIMEOUT_MS: '50', LISTEN_SHED_STORE_DELAY_MS: '0' } });
  const live = await open(ts, { uid: 'u1', custom_stt: 'enabled' });
  await live.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  const send = (text: string, start: number): Promise<void> => sendText(live, actor, suggestedLine(text, start));
  await send('Written first.', 0);
  await advance(ts, 600);
  await until(() => actor.conversationId !== undefined, { what: 'the conversation' });
  const lock = sqliteWriteLock(t, ts.dataDir);
  const transcript = async (): Promise<string> => {
    const res = await ts.req(`/v1/dev/user/conversations/${actor.conversationId!}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
    return res.json.transcript_segments.map((s: { text: string }) => s.text).join(' ');
  };
  const failures = () => counter(ts, 'listen_transcript_write_failures_total');
  const lost = () => counter(ts, 'listen_transcript_items_lost_total');
  return { ts, live, actor, send, lock, transcript, failures, lost };
}

t.test('a live step whose write fails keeps its segments for the next step', async (t) => {
  const { ts, live, actor, send, lock, transcript, failures, lost } = await setUp(t);
  await live.json((m) => Array.isArray(m)); // the first step's segments
  t.equal(await failures(), 0);
  await lock.hold();
  await send('Said while the store is locked.', 2);
  const jpeg = Buffer.from([0xff, 0xd8, 0xff, 1, 2, 3]);
  const images = actor.stats.imagesCompleted;
  live.ws.send(JSON.stringify({ type: 'image_chunk', id: 'img-1', index: 0, total: 1, data: jpeg.toString('base64') }));
  await until(() => actor.stats.imagesCompleted > images, { what: 'the photo assembled' });
  await advance(ts, 600); // the step awaits its writes: the first fails after the busy timeout
  t.equal(await failures(), 1, 'the failed write is counted');
  await advance(ts, 600);
  t.equal(await failures(), 2, 'the next step tried again, and failed again');
  await lock.release();
  const seen = live.json((m) => Array.isArray(m) && m.some((s: { text: string }) => s.text.includes('locked')));
  await advance(ts, 600);
  const segs = (await seen) as { text: string }[];
  t.match(segs.map((s) => s.text).join(' '), /Said while the store is locked\./, 'the client gets the segment once it is stored');
  t.equal(await transcript(), 'Written first. Said while the store is locked.', 'the stored transcript has it, once');
  const photos = await ts.service.services.conversations.photos(actor.conversationId!);
  t.same(photos.map((p) => p.bytes.equals(jpeg)), [true], 'the photo sent meanwhile is stored, once');
  t.equal(await failures(), 2, 'no more failures');
  t.equal(await lost(), 0, 'nothing given up');
  live.close();
  await live.closed;
});

t.test('speaker updates stored in a step whose segment write fails reach the client at the next step', async (t) => {
  const { ts, live, actor, lock, failures } = await setUp(t);
  const [first] = (await live.json((m) => Array.isArray(m))) as { id: string }[];
  // The store refuses new segments only (a trigger): the step's speaker update, written before them, goes through.
  await lock.exec(`CREATE TRIGGER refuse_segments BEFORE INSERT ON conversation_segments BEGIN SELECT RAISE(ABORT, 'segments refused'); END`);
  await sendText(live, actor, JSON.stringify({ type: 'speaker_assigned', speaker_id: 1, person_id: 'p-ana', person_name: 'Ana', segment_ids: [first!.id] }));
  // Another speaker, later: the merge leaves the first segment alone (it would re-send it itself).
  const other = { text: 'Said while segments are refused.', speaker: 'SPEAKER_02', speaker_id: 2, is_user: false, person_id: null, start: 30, end: 31 };
  await sendText(live, actor, JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [other] }));
  await advance(ts, 600);
  t.equal(await failures(), 1, 'the step failed');
  const stored = await ts.service.services.conversations.segments(actor.conversationId!);
  t.match(stored, [{ id: first!.id, personId: 'p-ana' }], 'the speaker update before the failure is stored');
  await lock.exec('DROP TRIGGER refuse_segments');
  const seen = live.json((m) => Array.isArray(m) && m.some((s: { id: string }) => s.id === first!.id));
  await advance(ts, 600);
  const segs = (await seen) as { id: string; text: string; person_id: string | null }[];
  t.match(segs.find((s) => s.id === first!.id), { person_id: 'p-ana' }, 'the client gets the updated segment');
  t.match(segs.find((s) => s.id !== first!.id), { text: other.text }, 'and the segment of the failed step, in the same message');
  t.equal(await failures(), 1);
  live.close();
  await live.closed;
});

t.test('a closing session tries its last write again until the store takes it', async (t) => {
  const { ts, live, actor, send, lock, transcript, failures, lost } = await setUp(t);
  await lock.hold();
  await send('Said just before leaving.', 2);
  live.close();
  await until(async () => (await failures()) === 1, { what: 'the closing flush failed' });
  t.equal(actor.state, 'draining', 'the session waits to try again');
  await advance(ts, 500);
  await until(async () => (await failures()) === 2, { what: 'the first retry failed' });
  await lock.release();
  await advance(ts, 1000);
  await until(() => actor.state === 'closed', { what: 'the session closed' });
  t.equal(await transcript(), 'Written first. Said just before leaving.', 'the last segment reached the store');
  t.equal(await failures(), 2);
  t.equal(await lost(), 0, 'nothing given up');
});

t.test('a closing session gives its segments up, counted, when the store fails at every try', async (t) => {
  const { ts, live, actor, send, lock, failures, lost } = await setUp(t);
  await lock.hold();
  await send('Never stored.', 2);
  live.close();
  await until(async () => (await failures()) === 1, { what: 'the closing flush failed' });
  let tries = 1;
  for (const waitMs of [500, 1000, 2000, 4000]) {
    t.equal(actor.state, 'draining');
    await advance(ts, waitMs);
    tries++;
    await until(async () => (await failures()) === tries, { what: `try ${tries} failed` });
  }
  await until(() => actor.state === 'closed', { what: 'the session closed after its last try' });
  t.equal(await lost(), 1, 'the segment given up is counted');
  await lock.release();
});
