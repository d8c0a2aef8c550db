// Redis going away while a live session talks: the silence timeout's end of the conversation cannot enqueue its
// processing job; the session keeps the conversation and ends it again at a later step, once Redis is back, and the
// conversation is processed. A redis-server of the test's own is killed and started again on the same port.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { freePort, portAnswers, startRedisServer } from '../../helpers/ports.js';
import { advance, open, sendAndStep } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { ConversationStatus } from '../../../engine/protocol.js';

const LINE = { text: 'Remember to water the plants on Friday.', speaker: 'SPEAKER_00', speaker_id: 0, is_user: true, person_id: null, start: 0, end: 2 };

t.test('Redis away at the silence timeout: the conversation is ended again once it is back, and processed', async (t) => {
  const port = await freePort();
  let redis = startRedisServer(port);
  t.teardown(() => {
    if (redis.exitCode === null) redis.kill('SIGKILL');
  });
  await until(() => portAnswers(port), { what: 'redis up' });
  const ts = await startService(t, { env: { REDIS_URL: `redis://127.0.0.1:${port}` } });
  const c = await open(ts, { uid: 'u1', custom_stt: 'enabled', conversation_timeout: '30' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await sendAndStep(ts, c, actor, JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [LINE] }));
  const id = actor.conversationId!;
  const status = async () => (await ts.service.services.conversations.getById(id))?.status;

  const exited = new Promise((r) => redis.once('exit', r));
  redis.kill('SIGKILL');
  await exited;
  await advance(ts, 30_000); // the silence timeout: the job cannot be enqueued, so the end is undone
  t.equal(await status(), ConversationStatus.IN_PROGRESS, 'the conversation is left in progress, not in processing without a job');
  t.equal(actor.conversationId, id, 'the session keeps the conversation, to end it again');
  t.match(/^listen_transcript_write_failures_total (\S+)/m.exec((await ts.req('/metrics')).text)?.[1], /^[1-9]/, 'the failed step is counted');

  redis = startRedisServer(port);
  await until(() => portAnswers(port), { what: 'redis up again' });
  // Each step tries again until the producer's connection is back; the worker's comes back too and processes it.
  // The device stays: a keep-alive each step keeps the 90 s inactivity close out of the picture.
  await until(async () => {
    c.ws.send(Buffer.from([0x8a, 0x00]));
    await advance(ts, 600);
    return (await status()) === ConversationStatus.COMPLETED;
  }, { what: 'the conversation processed', timeoutMs: 30_000, everyMs: 100 });
  t.equal(actor.conversationId, undefined, 'the session let it go');
  c.close();
  await c.closed;
});
