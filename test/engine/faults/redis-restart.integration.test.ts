// Redis killed and started again on its append-only file while sessions stream and processing jobs wait: live audio
// goes on (no session closed, every line stored), developer requests fail closed with 503 while the rate limiter
// cannot count them and answer again once Redis is back, and the jobs queued before the restart are processed.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { persistentRedis } from '../../helpers/ports.js';
import { advance, open, sendAndStep, suggestedLine } from '../../helpers/listen.js';
import { bearer } from '../../helpers/http.js';
import { until } from '../../helpers/until.js';
import { say, streaming } from '../../helpers/live-speech.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames, sine } from '../../helpers/codec-fixtures.js';
import { ManualClock } from '../../../engine/clock.js';
import { ConversationStatus } from '../../../engine/protocol.js';

t.test('Redis restarted mid-load: sessions stream on, dev requests fail closed then recover, queued jobs run', async (t) => {
  const redis = await persistentRedis(t);
  const clock = new ManualClock(Date.now());
  const engine = new RecordingSttEngine();
  // No jobs role: what is enqueued stays in Redis until the jobs node starts after the restart.
  const ts = await startService(t, { clock, sttEngines: [engine], env: { REDIS_URL: redis.url, ROLE: 'listen' } });
  const key = await ts.devKey('u1');

  // Three conversations ended by their silence timeout: three processing jobs waiting in Redis.
  const queued: string[] = [];
  const quiet = [];
  for (const uid of ['q1', 'q2', 'q3']) {
    const c = await open(ts, { uid, custom_stt: 'enabled', conversation_timeout: '30' });
    await c.ready();
    const actor = ts.service.sessions.sessionsOf(uid)[0]!;
    await sendAndStep(ts, c, actor, suggestedLine(`A line of ${uid}.`, 0));
    queued.push(actor.conversationId!);
    quiet.push(c);
  }
  await advance(ts, 30_000);
  for (const id of queued) t.equal((await ts.service.services.conversations.getById(id))?.status, ConversationStatus.PROCESSING, 'queued');
  for (const c of quiet) {
    c.close();
    await c.closed;
  }

  // A session streaming real Opus audio, and one sending suggested transcripts.
  const { c, actor, stream } = await streaming(ts, engine, 'u1');
  const custom = await open(ts, { uid: 'u4', custom_stt: 'enabled' });
  await custom.ready();
  const customActor = ts.service.sessions.sessionsOf('u4')[0]!;
  t.match(await say(ts, c, stream, 'Before the restart.', 'SPEAKER_00', 0.1), [{ text: 'Before the restart.' }]);

  await redis.kill();
  const health = await ts.req('/health');
  t.equal(health.status, 503, 'health says Redis is down');
  t.match(health.json, { checks: { redis: /./ } });
  const refused = await ts.req('/v1/dev/user/conversations', { headers: bearer(key) });
  t.equal(refused.status, 503, 'a developer request fails closed while its rate limit cannot be counted');
  t.equal(refused.headers['x-error-code'], 'ENG_ERR_DEPENDENCY_UNAVAILABLE');
  t.type(refused.json?.detail, 'string');

  // Live audio meanwhile: decoded, heard, answered and stored.
  const enc = new OpusEncoderStream(16000);
  const packets = frames(sine(330, 16000, 1, 8000), 320).map((f) => enc.encode(f));
  const before = stream.samples;
  for (const p of packets) c.ws.send(p);
  await until(() => stream.samples >= before + 16000 * 0.98, { what: 'audio decoded during the outage', timeoutMs: 20_000 });
  t.match(await say(ts, c, stream, 'During the restart.', 'SPEAKER_00', 1.1), [{ text: 'During the restart.' }], 'the device gets its words');
  t.match(await sendAndStep(ts, custom, customActor, suggestedLine('Suggested during the restart.', 0)), [{ text: 'Suggested during the restart.' }]);
  // The user ends that conversation by hand: its job cannot be queued, so the end is refused and undone.
  const u4Conversation = customActor.conversationId!;
  const u4 = bearer(await ts.token('u4'));
  const endRefused = await ts.req('/v1/conversations', { method: 'POST', headers: u4, body: {} });
  t.equal(endRefused.status, 503, 'ending a conversation is refused while its job cannot be queued');
  t.equal((await ts.service.services.conversations.getById(u4Conversation))?.status, ConversationStatus.IN_PROGRESS, 'and the conversation is left in progress, not stuck in processing');

  const restartedAt = Date.now();
  await redis.start();
  let back: Awaited<ReturnType<typeof ts.req>> | undefined;
  await until(async () => {
    back = await ts.req('/v1/dev/user/conversations', { headers: bearer(key) });
    return back.status === 200;
  }, { what: 'developer requests answered again', timeoutMs: 30_000, everyMs: 50 });
  t.comment(`developer requests answered again ${Date.now() - restartedAt} ms after redis-server was started`);
  await until(async () => (await ts.req('/health')).status === 200, { what: 'health ok again', timeoutMs: 30_000 });
  const endAgain = await ts.req('/v1/conversations', { method: 'POST', headers: u4, body: {} });
  t.equal(endAgain.status, 200, 'asked again once Redis is back, the end succeeds');
  t.match(endAgain.json, { memory: { id: u4Conversation } });
  queued.push(u4Conversation);

  // A jobs node of the same deployment takes the jobs enqueued before the kill.
  await startService(t, { sameDeploymentAs: ts, clock, env: { ROLE: 'jobs' } });
  await until(async () => {
    const s = await Promise.all(queued.map(async (id) => (await ts.service.services.conversations.getById(id))?.status));
    return s.every((x) => x === ConversationStatus.COMPLETED);
  }, { what: 'the queued conversations processed', timeoutMs: 60_000, everyMs: 100 });
  t.pass('every job queued before the restart ran');

  // Stepped until the device hears it: the jobs node writes its results beside the listen node meanwhile.
  t.match(await say(ts, c, stream, 'After the restart.', 'SPEAKER_00', 2.1, 10), [{ text: 'After the restart.' }], 'the device gets the words said after the restart');
  t.equal(c.ws.readyState, c.ws.OPEN, 'the streaming session was never closed');
  t.equal(custom.ws.readyState, custom.ws.OPEN, 'nor the other one, whose conversation was ended and processed');
  const segments = await ts.service.services.conversations.segments(actor.conversationId!);
  t.equal(segments.map((s) => s.text).join(' '), 'Before the restart. During the restart. After the restart.', 'the stored transcript is complete');
  const other = await ts.service.services.conversations.segments(u4Conversation);
  t.same(other.map((s) => s.text), ['Suggested during the restart.']);
  c.close();
  custom.close();
  await Promise.all([c.closed, custom.closed]);
});
