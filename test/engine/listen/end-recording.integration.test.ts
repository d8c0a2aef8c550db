// Manual end of recording (POST /v1/conversations) while speech is still on its way through decoding and the speech
// provider: the words land in the conversation that ends, on the session's node or another one.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { sine } from '../../helpers/codec-fixtures.js';
import { startFakeDeepgram, type FakeDeepgram, type ScriptedWord } from '../../fakes/deepgram-server.js';
import { ConversationStatus } from '../../../engine/protocol.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';

const said = (at: number, ...texts: string[]): ScriptedWord[] => texts.map((word, i) => ({ word, start: at + i * 0.3, end: at + i * 0.3 + 0.25 }));
const FIRST = said(0.2, 'call', 'the', 'dentist', 'tomorrow');
const SECOND = said(2.4, 'buy', 'some', 'milk');

/**
 * A provider that answers only when asked to finalize (results far past the audio), and late: 300 ms after. So the
 * words of the first two seconds exist nowhere but at the provider when the user ends the conversation.
 */
async function lateProvider(t: Test): Promise<FakeDeepgram> {
  const fake = await startFakeDeepgram({ sweepEveryMs: 0 });
  fake.fallback = { kind: 'accept', results: [{ afterS: 3600, words: FIRST }, { afterS: 3601, words: SECOND }], answerDelayMs: 300 };
  t.teardown(() => fake.close());
  return fake;
}

const providerA = (fake: FakeDeepgram): Record<string, string> => ({ STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' });

/** Sends `seconds` of 16 kHz pcm16 from `fromS`, in 100 ms messages. */
function speak(c: ListenClient, fromS: number, seconds: number): number {
  const pcm = sine(300, 16000, fromS + seconds, 3000).subarray(fromS * 16000);
  let n = 0;
  for (let i = 0; i < pcm.length; i += 1600, n++) c.ws.send(new Uint8Array(pcm.buffer, pcm.byteOffset + i * 2, Math.min(1600, pcm.length - i) * 2).slice());
  return n;
}

async function transcript(ts: TestService, id: string): Promise<string> {
  const r = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  return r.status === 200 ? ((r.json as any).transcript_segments ?? []).map((s: { text: string }) => s.text).join(' ') : `<${r.status}>`;
}

/** A session streaming two seconds the provider has not answered for, and the (empty) conversation its audio opened. */
async function speaking(listenNode: TestService): Promise<{ c: ListenClient; conversationId: string }> {
  const c = await open(listenNode, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const actor = listenNode.service.sessions.sessionsOf('u1')[0]!;
  const sent = speak(c, 0, 2);
  await until(() => actor.stats.audioMessages === sent, { what: 'the audio received' });
  await advance(listenNode, 600);
  const conversationId = actor.conversationId!;
  return { c, conversationId };
}

async function endsWithTheWords(t: Test, listenNode: TestService, httpNode: TestService, fake: FakeDeepgram): Promise<void> {
  const auth = bearer(await listenNode.token('u1'));
  t.equal((await httpNode.req('/v1/conversations', { method: 'POST', headers: auth, body: {} })).status, 404, 'nothing live, nothing in progress: 404');

  const { c, conversationId } = await speaking(listenNode);
  t.ok(conversationId, 'the audio opened a conversation');
  t.equal(await transcript(listenNode, conversationId), '', 'nothing transcribed yet');

  const res = await httpNode.req('/v1/conversations', { method: 'POST', headers: auth, body: {} });
  t.equal(res.status, 200, 'the conversation being recorded is ended');
  t.equal(res.json.memory.id, conversationId, 'the one the session records into');
  // The in-process worker may already have finished it by the time the answer is read.
  t.ok(['processing', 'completed'].includes(res.json.memory.status), `no longer in progress (${res.json.memory.status})`);
  t.same(res.json.messages, []);
  t.equal(await transcript(listenNode, conversationId), 'call the dentist tomorrow', 'the words said before the end are in it');
  t.ok(fake.streams[0]!.controls.includes('Finalize'), 'the provider was asked for its answer');

  t.equal((await c.json((m) => m.type === 'memory_processing_started')).memory.id, conversationId, 'the device hears it');
  const created = await c.json((m) => m.type === 'memory_created', 20_000);
  t.equal(created.memory.id, conversationId, 'and it is processed');
  t.equal(created.memory.status, 'completed');
  const actor = listenNode.service.sessions.sessionsOf('u1')[0]!;
  t.equal(actor.conversationId, undefined, 'the session let it go');
  t.equal(await listenNode.service.services.conversations.latestWithStatus('u1', ConversationStatus.IN_PROGRESS), undefined, 'no new conversation appeared');

  // Further speech opens a new conversation as usual; the client's close finalizes it into that one.
  const sent = speak(c, 2, 1);
  await until(() => actor.stats.audioMessages === 20 + sent, { what: 'more audio received' });
  await advance(listenNode, 600);
  const next = actor.conversationId;
  t.ok(next && next !== conversationId, 'a new conversation');
  c.close();
  await until(() => listenNode.service.sessions.size === 0, { what: 'the session drained' });
  t.equal(await transcript(listenNode, next!), 'buy some milk', 'the later words went there');
  t.equal(await transcript(listenNode, conversationId), 'call the dentist tomorrow', 'and not into the ended one');
}

t.test('POST /v1/conversations during speech not yet transcribed: the words land in the ended conversation', async (t) => {
  const fake = await lateProvider(t);
  const ts = await startService(t, { env: providerA(fake) });
  await endsWithTheWords(t, ts, ts, fake);
});

t.test('the manual end arriving on another node than the session', async (t) => {
  const fake = await lateProvider(t);
  const listenNode = await startService(t, { env: { ROLE: 'listen', ...providerA(fake) } });
  const jobsNode = await startService(t, { sameDeploymentAs: listenNode, env: { ROLE: 'jobs' } });
  await endsWithTheWords(t, listenNode, jobsNode, fake);
});

t.test('a provider that answers past the wait: the end goes ahead without it, and its words open the next conversation', async (t) => {
  const engine = new RecordingSttEngine('provider_a');
  let answer!: () => void;
  engine.autoAnswer = () => [{ text: 'Call the dentist tomorrow.', speaker: 'SPEAKER_00', start: 0.2, end: 1.4 }];
  const ts = await startService(t, { sttEngines: [engine] });
  const { conversationId } = await speaking(ts);
  const stream = engine.streams[0]!;
  stream.finalizeGate = new Promise<void>((resolve) => (answer = resolve));
  const ending = ts.req('/v1/conversations', { method: 'POST', headers: bearer(await ts.token('u1')), body: {} });
  await until(() => stream.finalized, { what: 'the provider asked for its answer' });
  await advance(ts, 5000); // MANUAL_END_AUDIO_WAIT_MS on the session's clock
  const res = await ending;
  t.equal(res.status, 404, 'nothing was transcribed in time: the empty conversation is deleted, as a silent one');
  t.equal(await transcript(ts, conversationId), '<404>');
  answer();
  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await until(async () => {
    await advance(ts, 600);
    return actor.conversationId !== undefined;
  }, { what: 'the late words stepped' });
  const next = actor.conversationId;
  t.ok(next && next !== conversationId, 'the late words opened the next conversation');
  t.equal(await transcript(ts, next!), 'Call the dentist tomorrow.', 'they are not lost');
});
