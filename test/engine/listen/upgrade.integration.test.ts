// /v4/listen admission and the idle protocol: rejections, service_status sequence, heartbeat, keep-alives, inactivity.
import t from 'tap';
import { startService } from '../../helpers/service.js';
import { advance, connect, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';

t.test('rejections before and after the upgrade', async (t) => {
  const ts = await startService(t, { env: { MAX_SESSIONS: '2', MAX_SESSIONS_PER_USER: '1' } });

  const noToken = await connect(ts, { uid: 'u1' }, null);
  t.equal(noToken.status, 401, 'no Authorization header: HTTP 401, no upgrade');

  const wrongUid = await connect(ts, { uid: 'u1' }, await ts.token('someone-else'));
  t.equal(wrongUid.status, 401, 'token subject differs from uid: 401');

  const garbage = await connect(ts, { uid: 'u1' }, 'not-a-token');
  t.equal(garbage.status, 401, 'invalid token: 401');

  const noUid = await connect(ts, {}, await ts.token('u1'));
  t.equal(noUid.status, 400, 'missing uid: 400');

  for (const bad of <Record<string, string>[]>[{ conversation_timeout: '1' }, { conversation_timeout: '14401' }, { sample_rate: 'fast' }, { custom_stt: 'yes' }, { stt_service: 'provider_z' }, { include_speech_profile: 'maybe' }]) {
    const r = await connect(ts, { uid: 'u1', ...bad });
    t.equal(r.status, 400, `${JSON.stringify(bad)}: 400`);
    t.match(JSON.parse(r.status !== undefined ? r.body : '{}').detail, Object.keys(bad)[0]!, 'the detail names the parameter');
  }

  for (const q of <Record<string, string>[]>[{ codec: 'mp3' }, { codec: 'opus', sample_rate: '44100' }, { codec: 'pcm16', channels: '3' }]) {
    const c = await open(ts, { uid: 'u1', ...q });
    const closed = await c.closed;
    t.equal(closed.code, 1003, `${JSON.stringify(q)}: close 1003`);
    t.ok(closed.reason.length > 0, `with a reason: ${closed.reason}`);
  }
  await until(() => ts.service.sessions.size === 0, { what: 'no sessions left' });

  const first = await open(ts, { uid: 'u1' });
  await first.ready();
  const sameUser = await open(ts, { uid: 'u1' });
  t.same(await sameUser.closed, { code: 1013, reason: 'too many sessions for this user' }, 'per-user limit: 1013');
  const second = await open(ts, { uid: 'u2' });
  await second.ready();
  const third = await open(ts, { uid: 'u3' });
  t.same(await third.closed, { code: 1013, reason: 'try again later' }, 'node limit: 1013 try again later');
  first.close();
  second.close();
  await Promise.all([first.closed, second.closed]);
});

t.test('a session still draining after its client left does not count against the per-user limit', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine], env: { MAX_SESSIONS_PER_USER: '1' } });
  const first = await open(ts, { uid: 'u1' });
  await first.ready();
  let release = (): void => undefined;
  engine.streams[0]!.finalizeGate = new Promise<void>((resolve) => (release = resolve));
  first.close();
  await first.closed;
  await until(() => engine.streams[0]!.finalized, { what: 'the first session is finalizing' });
  t.equal(ts.service.sessions.size, 1, 'the first session is still draining');
  t.equal(ts.service.sessions.draining, 1, 'and counts as draining');
  const again = await open(ts, { uid: 'u1' });
  await again.ready();
  t.pass('the reconnect is admitted while the first session drains');
  const third = await open(ts, { uid: 'u1' });
  t.same(await third.closed, { code: 1013, reason: 'too many sessions for this user' }, 'a second connected session is still refused');
  release();
  await until(() => ts.service.sessions.size === 1, { what: 'the first session finished draining' });
  again.close();
  await again.closed;
});

t.test('service_status sequence, heartbeat, keep-alives and inactivity', async (t) => {
  const engine = new RecordingSttEngine();
  const ts = await startService(t, { sttEngines: [engine] });
  // The service's own entries (malloc trim); the session must leave none of its own behind.
  const serviceTimers = ts.service.scheduler.size;
  const c = await open(ts, { uid: 'u1', language: 'auto' });
  const statuses: string[] = [];
  for (;;) {
    const m = await c.json((x) => x.type === 'service_status');
    statuses.push(m.status);
    if (m.status === 'ready') break;
  }
  t.same(statuses, ['initiating', 'in_progress_conversations_processing', 'stt_initiating', 'ready']);
  t.equal(engine.streams.length, 1, 'one STT stream');
  t.equal(engine.streams[0]!.options.language, 'multi', 'auto is rewritten to multi');

  await advance(ts, 10_000);
  t.equal(await c.next((f) => f === 'ping'), 'ping', 'text ping after 10 s');
  await advance(ts, 10_000);
  t.equal(await c.next((f) => f === 'ping'), 'ping', 'and again after 20 s');

  // Keep-alives (≤ 2 bytes) refresh activity but are not audio; malformed JSON is ignored.
  c.ws.send(Buffer.from([0x8a, 0x00]));
  c.ws.send('{not json');
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await until(() => actor.stats.keepAlives === 1 && actor.stats.malformed === 1, { what: 'keep-alive and malformed frame' });
  t.equal(actor.stats.audioMessages, 0, 'keep-alive is not audio');
  t.equal(actor.state, 'ready', 'still READY: no audio yet');
  await advance(ts, 600);
  t.equal(actor.conversationId, undefined, 'no conversation without audio');

  // 90 s counted from the keep-alive (at +20 s): still open at +100 s, closed by the +110 s heartbeat.
  await advance(ts, 80_000 - 600);
  t.equal(actor.state, 'ready', 'open 80 s after the last message');
  await advance(ts, 10_000);
  t.same(await c.closed, { code: 1001, reason: 'inactivity timeout' }, '90 s without a client message: 1001');
  await until(() => ts.service.sessions.size === 0, { what: 'session removed' });
  t.ok(engine.streams[0]!.closed, 'STT stream closed');
  t.equal(ts.service.scheduler.size, serviceTimers, 'no timers left behind');
});
