// Live translation of `language=multi` sessions over a real socket: a provider fake's Spanish words come back translated,
// growing segments are translated once they settle, the node cache spares requests, a failing model is retried then
// given up on without harming the session, and without a model `ready` says translation is off.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, sendAndStep, type ListenClient } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { sine } from '../../helpers/codec-fixtures.js';
import { startFakeOpenAI, type FakeOpenAI, type Script } from '../../fakes/openai-server.js';
import { FAKE_SONIOX_KEY, startFakeSoniox } from '../../fakes/soniox-server.js';
import type { SessionActor } from '../../../engine/listen/session-actor.js';

/** What the fake model knows: Spanish sentences and their English. */
const SPANISH: Record<string, string> = {
  'Hola, ¿cómo estás?': 'Hello, how are you?',
  'Estoy muy bien.': 'I am very well.',
  '¿Dónde está la estación?': 'Where is the station?',
};

/** A fake model: the sentences it knows are Spanish, any other is taken as English and answered unchanged. */
const model: Script = {
  kind: 'compute',
  answer(body: any) {
    // The conversation processor asks the same endpoint when a conversation ends: an answer it cannot use.
    if (body.response_format.json_schema.name !== 'translations') return {};
    const { target, sentences } = JSON.parse(body.messages[body.messages.length - 1].content) as { target: string; sentences: string[] };
    return { items: sentences.map((s) => (s in SPANISH ? { language: 'es', text: target === 'en' ? SPANISH[s] : `[${target}] ${SPANISH[s]}` } : { language: 'en', text: s })) };
  },
};

async function llm(t: Test): Promise<FakeOpenAI> {
  const fake = await startFakeOpenAI();
  fake.fallback = model;
  t.teardown(() => fake.close());
  return fake;
}

/** The sentences a request asked for. */
const asked = (fake: FakeOpenAI, i: number): string[] => JSON.parse(fake.requests[i]!.body.messages.at(-1).content).sentences;

const line = (text: string, speaker: number, start: number, end: number): string =>
  JSON.stringify({ type: 'suggested_transcript', stt_provider: 'app', segments: [{ text, speaker: `SPEAKER_0${speaker}`, speaker_id: speaker, is_user: false, person_id: null, start, end }] });

const isTranslation = (m: any): boolean => m?.type === 'translation';

/** Moves the clock in small steps until `cond` holds (the model answers over a real socket meanwhile). */
async function advanceUntil(ts: TestService, cond: () => boolean | Promise<boolean>, what: string, stepMs = 250): Promise<void> {
  await until(async () => {
    if (await cond()) return true;
    await advance(ts, stepMs);
    return false;
  }, { what, timeoutMs: 30_000 });
}

const metric = async (ts: TestService, name: string, label: string): Promise<number> => {
  const m = new RegExp(`^${name}\\{outcome="${label}"\\} (\\d+)$`, 'm').exec((await ts.req('/metrics')).text);
  return m ? Number(m[1]) : 0;
};

async function multiSession(ts: TestService, uid = 'u1'): Promise<{ c: ListenClient; actor: SessionActor; ready: any }> {
  const c = await open(ts, { uid, custom_stt: 'enabled', language: 'multi' });
  const ready = await c.ready();
  return { c, actor: ts.service.sessions.sessionsOf(uid)[0]!, ready };
}

t.test('provider_b in multi: the Spanish segment is translated and stored, the English one is not sent to the model', async (t) => {
  const fake = await llm(t);
  const soniox = await startFakeSoniox();
  t.teardown(() => soniox.close());
  const words = (speaker: number, at: number, ...texts: string[]) => texts.map((text, i) => ({ text, start_ms: at + i * 300, end_ms: at + i * 300 + 250, speaker }));
  soniox.script({ tokens: [...words(1, 100, 'Hola,', ' ¿cómo', ' estás?', ' Estoy', ' muy', ' bien.'), ...words(2, 2500, ' I', ' think', ' that', ' is', ' great.')], finalLagMs: 500 });
  const ts = await startService(t, { env: { STT_PROVIDERS: 'provider_b', PROVIDER_B_URL: soniox.url, PROVIDER_B_API_KEY: FAKE_SONIOX_KEY, LLM_BASE_URL: fake.baseUrl } });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000', language: 'multi' });
  t.same(await c.ready(), { type: 'service_status', status: 'ready', provider: 'provider_b', translation: { enabled: true, language: 'en' } }, 'ready says translation is on, into English');
  t.equal(soniox.sessions[0]?.config?.language_hints, undefined, 'the provider identifies the language itself');
  const pcm = sine(300, 16000, 5, 3000);
  for (let i = 0; i < pcm.length; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, 1600 * 2).slice());

  const seen = new Map<string, any>();
  const translations: any[] = [];
  await advanceUntil(ts, async () => {
    for (;;) {
      const m = await c.json((x) => Array.isArray(x) || isTranslation(x), 50).catch(() => undefined);
      if (!m) break;
      if (Array.isArray(m)) for (const s of m) seen.set(s.id, s);
      else translations.push(m);
    }
    return translations.length > 0;
  }, 'a translation message', 200);
  const spanish = [...seen.values()].find((s) => s.text.startsWith('Hola'));
  const english = [...seen.values()].find((s) => s.text.startsWith('I think'));
  t.ok(spanish && english, 'both speakers transcribed');
  t.same(translations[0].segments, [{ id: spanish.id, translations: [{ lang: 'en', text: 'Hello, how are you? I am very well.' }] }], 'the Spanish segment, by its id, in English');
  t.equal(fake.requests.length, 1, 'one model request');
  t.same(asked(fake, 0), ['Hola, ¿cómo estás?', 'Estoy muy bien.'], 'by sentence, and never the English segment');

  const actor = ts.service.sessions.sessionsOf('u1')[0]!;
  await until(async () => (await ts.service.services.conversations.segments(actor.conversationId!)).some((s) => s.translations), { what: 'the translation stored' });
  const stored = await ts.service.services.conversations.segments(actor.conversationId!);
  t.same(stored.find((s) => s.id === spanish.id)?.translations, [{ lang: 'en', text: 'Hello, how are you? I am very well.' }], 'stored on the segment');
  t.equal(stored.find((s) => s.id === english.id)?.translations, undefined, 'the English segment has none');
  t.equal(await metric(ts, 'translation_segments_total', 'same_language'), 1, 'the English segment counted as already in the target language');
  c.close();
});

t.test('a growing segment is translated once it settles, its new sentences only; the cache and the model say "same"', async (t) => {
  const fake = await llm(t);
  const ts = await startService(t, { env: { LLM_BASE_URL: fake.baseUrl } });
  const { c, actor } = await multiSession(ts);

  const [a] = await sendAndStep(ts, c, actor, line('Hola, ¿cómo estás?', 1, 0, 1.5));
  const [grown] = await sendAndStep(ts, c, actor, line('Estoy muy bien.', 1, 2, 3));
  t.equal(grown.id, a.id, 'the continuation merged into the same segment');
  t.equal(fake.requests.length, 0, 'nothing translated while the segment changes every step');
  await advance(ts, 1000);
  const first = await c.json(isTranslation, 30_000);
  t.same(first.segments, [{ id: a.id, translations: [{ lang: 'en', text: 'Hello, how are you? I am very well.' }] }]);
  t.equal(fake.requests.length, 1);

  // It grows again: only the new sentence goes to the model, and the stored translation is replaced.
  const [again] = await sendAndStep(ts, c, actor, line('¿Dónde está la estación?', 1, 4, 5));
  t.equal(again.id, a.id);
  await advance(ts, 1000);
  const second = await c.json(isTranslation, 30_000);
  const full = 'Hello, how are you? I am very well. Where is the station?';
  t.same(second.segments, [{ id: a.id, translations: [{ lang: 'en', text: full }] }], 'the same id, the whole text');
  t.equal(fake.requests.length, 2);
  t.same(asked(fake, 1), ['¿Dónde está la estación?'], 'the settled sentences came from the cache');
  await until(async () => (await ts.service.services.conversations.segments(actor.conversationId!))[0]?.translations?.[0]?.text === full, { what: 'stored' });
  t.same((await ts.service.services.conversations.segments(actor.conversationId!))[0]!.translations, [{ lang: 'en', text: full }], 'replaced, not added');

  // Another speaker says a sentence the node has translated: no request.
  const [b] = await sendAndStep(ts, c, actor, line('Hola, ¿cómo estás?', 2, 10, 11));
  await advance(ts, 1000);
  const third = await c.json(isTranslation, 30_000);
  t.same(third.segments, [{ id: b.id, translations: [{ lang: 'en', text: 'Hello, how are you?' }] }]);
  t.equal(fake.requests.length, 2, 'answered from the cache');

  // Too short for the offline guess: the model answers that it is English already, and nothing is sent.
  await sendAndStep(ts, c, actor, line('Okay.', 3, 14, 15));
  await advance(ts, 1000);
  await until(async () => (await metric(ts, 'translation_segments_total', 'same_language')) === 1, { what: 'decided as English' });
  t.equal(fake.requests.length, 3);
  t.same(asked(fake, 2), ['Okay.']);
  t.equal(c.frames.filter((f) => f.includes('"type":"translation"')).length, 3, 'no translation message for it');
  t.equal(await metric(ts, 'translation_segments_total', 'translated'), 3);
  c.close();
});

t.test('a failing model: retried, then the segment is skipped and counted; a timeout is retried; the session goes on', async (t) => {
  const fake = await llm(t);
  fake.fallback = { kind: 'status', status: 503 };
  const ts = await startService(t, { env: { LLM_BASE_URL: fake.baseUrl } });
  const { c, actor } = await multiSession(ts);

  const [a] = await sendAndStep(ts, c, actor, line('Hola, ¿cómo estás?', 1, 0, 1.5));
  await advanceUntil(ts, () => fake.requests.length === 3, 'three tries', 1000);
  await until(async () => (await metric(ts, 'translation_segments_total', 'skipped')) === 1, { what: 'the segment given up on' });
  t.equal(await metric(ts, 'translation_requests_total', 'error'), 3);
  await advance(ts, 10_000);
  t.equal(fake.requests.length, 3, 'no further try');

  // The next request is held past the timeout, the one after it answers.
  fake.script({ kind: 'hold' });
  fake.fallback = model;
  const [b] = await sendAndStep(ts, c, actor, line('¿Dónde está la estación?', 2, 10, 11));
  await advanceUntil(ts, () => fake.requests.length === 4, 'the held request');
  await advanceUntil(ts, () => c.frames.some((f) => f.includes('"type":"translation"')), 'the translation after the timeout');
  t.equal(await metric(ts, 'translation_requests_total', 'timeout'), 1, 'the held request timed out on the service clock');
  const msg = await c.json(isTranslation, 30_000);
  t.same(msg.segments, [{ id: b.id, translations: [{ lang: 'en', text: 'Where is the station?' }] }]);
  t.same(asked(fake, 4), ['¿Dónde está la estación?'], 'the given-up segment is not asked again');
  t.equal(actor.state, 'streaming', 'the session never noticed');
  const stored = await ts.service.services.conversations.segments(actor.conversationId!);
  t.equal(stored.find((s) => s.id === a.id)?.translations, undefined);
  const [later] = await sendAndStep(ts, c, actor, line('More words.', 3, 20, 21));
  t.ok(later.id, 'segments still flow');
  c.close();
});

t.test('the target is the user’s saved language; stored on PostgreSQL too', async (t) => {
  const fake = await llm(t);
  const ts = await startService(t, { store: 'pg', env: { LLM_BASE_URL: fake.baseUrl } });
  const res = await ts.req('/v1/users/settings', { method: 'PATCH', headers: bearer(await ts.token('u1')), body: { language: 'fr' } });
  t.equal(res.status, 200);
  const { c, actor, ready } = await multiSession(ts);
  t.same(ready.translation, { enabled: true, language: 'fr' });
  const [a] = await sendAndStep(ts, c, actor, line('Estoy muy bien.', 1, 0, 1));
  await advance(ts, 1000);
  t.same((await c.json(isTranslation, 30_000)).segments, [{ id: a.id, translations: [{ lang: 'fr', text: '[fr] I am very well.' }] }]);
  t.match(fake.requests[0]!.body.messages[0].content, /"fr"/, 'the model is told the target');
  await until(async () => (await ts.service.services.conversations.segments(actor.conversationId!))[0]?.translations !== undefined, { what: 'stored' });
  t.same((await ts.service.services.conversations.segments(actor.conversationId!))[0]!.translations, [{ lang: 'fr', text: '[fr] I am very well.' }]);
  c.close();
});

t.test('without a language model: ready says translation is off and nothing is translated; other languages unchanged', async (t) => {
  const ts = await startService(t);
  const { c, actor, ready } = await multiSession(ts);
  t.same(ready, { type: 'service_status', status: 'ready', translation: { enabled: false, reason: 'llm_not_configured' } });
  await sendAndStep(ts, c, actor, line('Hola, ¿cómo estás?', 1, 0, 1.5));
  await advance(ts, 5000);
  await sendAndStep(ts, c, actor, line('Estoy muy bien.', 2, 10, 11));
  t.notOk(c.frames.some((f) => f.includes('"type":"translation"')), 'no translation message');
  c.close();

  const other = await open(ts, { uid: 'u2', custom_stt: 'enabled', language: 'es' });
  t.same(await other.ready(), { type: 'service_status', status: 'ready' }, 'a session not in multi: ready as before');
  other.close();
});
