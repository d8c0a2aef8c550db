// Redis stops answering without closing its connections (the process frozen with SIGSTOP, as a hung server or a
// network that drops packets looks): a request that needs it is refused with 503 once its commands time out instead
// of waiting for ever, live sessions stream on, and once Redis answers again nothing is lost: the conversation whose
// end was refused is processed.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { persistentRedis } from '../../helpers/ports.js';
import { open, sendAndStep, suggestedLine } from '../../helpers/listen.js';
import { bearer } from '../../helpers/http.js';
import { until } from '../../helpers/until.js';
import { say, streaming } from '../../helpers/live-speech.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { ManualClock } from '../../../engine/clock.js';
import { ConversationStatus } from '../../../engine/protocol.js';

t.setTimeout(180_000);

t.test('a frozen Redis: requests refused, not held; sessions stream on; the conversation ended meanwhile is processed', async (t) => {
  const redis = await persistentRedis(t);
  t.teardown(() => redis.thaw());
  const clock = new ManualClock(Date.now());
  const engine = new RecordingSttEngine();
  // No jobs role: the conversation ended here is processed by a jobs node started once Redis is back.
  const ts = await startService(t, { clock, sttEngines: [engine], env: { REDIS_URL: redis.url, ROLE: 'listen' } });
  const key = await ts.devKey('u1');
  const { c, actor, stream } = await streaming(ts, engine, 'u1');
  const custom = await open(ts, { uid: 'u2', custom_stt: 'enabled' });
  await custom.ready();
  const customActor = ts.service.sessions.sessionsOf('u2')[0]!;
  t.match(await say(ts, c, stream, 'Before the freeze.', 'SPEAKER_00', 0.1), [{ text: 'Before the freeze.' }]);
  t.match(await sendAndStep(ts, custom, customActor, suggestedLine('Suggested before the freeze.', 0)), [{ text: 'Suggested before the freeze.' }]);
  const ended = customActor.conversationId!;

  redis.freeze();
  const refused = await ts.req('/v1/dev/user/conversations', { headers: bearer(key) });
  t.equal(refused.status, 503, 'a developer request is refused');
  t.equal(refused.headers['x-error-code'], 'ENG_ERR_DEPENDENCY_UNAVAILABLE');
  const health = await ts.req('/health');
  t.equal(health.status, 503, 'health says Redis is down');
  t.match(health.json, { checks: { redis: /./ } });
  // Ending a conversation queues a job: the queue's command is given up on rather than waited for.
  const token = await ts.token('u2');
  const end = await ts.req('/v1/conversations', { method: 'POST', headers: bearer(token), body: {} });
  t.equal(end.status, 503, 'ending the conversation by hand is refused, not held');
  t.same(end.json, { detail: 'Service temporarily unavailable: Redis is unreachable' });

  // Live audio meanwhile: heard, answered and stored.
  t.match(await say(ts, c, stream, 'During the freeze.', 'SPEAKER_00', 1.1), [{ text: 'During the freeze.' }], 'the device gets its words');

  redis.thaw();
  await until(async () => (await ts.req('/v1/dev/user/conversations', { headers: bearer(key) })).status === 200, { what: 'developer requests answered again', timeoutMs: 30_000, everyMs: 50 });
  await until(async () => (await ts.req('/health')).status === 200, { what: 'health ok again', timeoutMs: 30_000 });
  // The refused end's own request to the session reached it once Redis answered: the conversation may already be
  // ended (asking again then finds none in progress, 404); either way it is processed (below).
  const again = await ts.req('/v1/conversations', { method: 'POST', headers: bearer(token), body: {} });
  t.ok(again.status === 200 || again.status === 404, `ending it again is answered (${again.status})`);
  await until(async () => (await ts.service.services.conversations.getById(ended))?.status !== ConversationStatus.IN_PROGRESS, { what: 'the conversation ended' });

  t.match(await say(ts, c, stream, 'After the freeze.', 'SPEAKER_00', 2.1), [{ text: 'After the freeze.' }]);
  t.equal(c.ws.readyState, c.ws.OPEN, 'the streaming session was never closed');
  const segments = await ts.service.services.conversations.segments(actor.conversationId!);
  t.equal(segments.map((s) => s.text).join(' '), 'Before the freeze. During the freeze. After the freeze.', 'the stored transcript is complete');

  await startService(t, { sameDeploymentAs: ts, clock, env: { ROLE: 'jobs' } });
  await until(async () => (await ts.service.services.conversations.getById(ended))?.status === ConversationStatus.COMPLETED, { what: 'the ended conversation processed', timeoutMs: 60_000, everyMs: 100 });
  t.pass('the conversation whose end was refused is processed');
  c.close();
  custom.close();
  await Promise.all([c.closed, custom.closed]);
});
