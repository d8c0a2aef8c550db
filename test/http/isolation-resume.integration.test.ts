// Resume of acknowledged audio across users, beside the isolation walk: another user's session id, live or ended, is
// refused exactly as an id the service never issued (close 4404 `unknown session`, nothing sent before it), and the
// owner's session goes on untouched.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { startService, type TestService } from '../helpers/service.js';
import { advance, open, type Closed, type ListenClient } from '../helpers/listen.js';
import { until } from '../helpers/until.js';
import { RecordingSttEngine } from '../fakes/recording-stt.js';

const QUERY = { codec: 'pcm16', sample_rate: '16000', ack: 'enabled' };
/** 20 ms of pcm16. */
const frame = (n: number): Uint8Array => new Uint8Array(new Int16Array(320).fill(n).buffer);

const lastAck = (c: ListenClient): number =>
  Math.max(-1, ...c.frames.filter((f) => f.includes('"audio_ack"')).map((f) => (JSON.parse(f) as { offset_ms: number }).offset_ms));

async function streamTo(ts: TestService, c: ListenClient, from: number, to: number): Promise<void> {
  for (let n = from; n < to; n++) c.ws.send(frame(n));
  await until(async () => {
    await advance(ts, 1000);
    return lastAck(c) >= to * 20;
  }, { what: `audio_ack ${to * 20}` });
}

/** Opens a resume of `sessionId` as `uid`: what the connection got before it closed, and how it closed. */
async function resumeAs(ts: TestService, uid: string, sessionId: string): Promise<{ closed: Closed; frames: string[] }> {
  const c = await open(ts, { uid, ...QUERY, resume: sessionId, offset_ms: '0' });
  const closed = await c.closed;
  return { closed, frames: c.frames };
}

t.test('a resume of another user\'s session, live or ended, is answered as one of an unknown id', async (t) => {
  const ts = await startService(t, { sttEngines: [new RecordingSttEngine('provider_a')] });
  const alice = await open(ts, { uid: 'alice', ...QUERY });
  const { session_id: aliceId } = await alice.json((m) => m.type === 'audio_session');
  await alice.ready();
  await streamTo(ts, alice, 0, 10);
  const bob = await open(ts, { uid: 'bob', ...QUERY });
  await bob.ready();
  await streamTo(ts, bob, 0, 10);

  const unknown = await resumeAs(ts, 'bob', randomUUID());
  t.same(unknown, { closed: { code: 4404, reason: 'unknown session' }, frames: [] }, 'an id never issued: 4404, nothing else');
  t.same(await resumeAs(ts, 'bob', aliceId), unknown, 'alice\'s live session: the same answer');
  // Alice's connection is neither replaced nor disturbed: her audio goes on being acknowledged.
  await streamTo(ts, alice, 10, 20);
  t.notOk(alice.frames.some((f) => f.includes('session resumed')), 'alice\'s connection was not superseded');
  alice.close();
  t.equal((await alice.closed).code, 1000);
  await until(() => ts.service.sessions.sessionsOf('alice').length === 0, { what: 'alice\'s session drained', timeoutMs: 30_000 });

  t.same(await resumeAs(ts, 'bob', aliceId), unknown, 'alice\'s ended session: the same answer');
  // Alice resumes her own session where it ended; bob's own session is still his.
  const again = await open(ts, { uid: 'alice', ...QUERY, resume: aliceId, offset_ms: '400' });
  t.match(await again.json((m) => m.type === 'audio_session'), { session_id: aliceId, offset_ms: 400 }, 'alice resumes her session');
  await again.ready();
  again.close();
  await again.closed;
  await streamTo(ts, bob, 10, 20);
  bob.close();
  t.equal((await bob.closed).code, 1000, 'bob\'s session went on');
});
