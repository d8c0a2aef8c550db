// Voice messages over HTTP end to end: the real service, the provider_a fake's pre-recorded API, real espeak-ng speech,
// real WAV, Opus `.bin` and raw linear16 uploads sent by fetch, every outcome of the vocabulary from a real request.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import { speak, silence } from '../helpers/speech.js';
import { opusBinFile, speech, writeWav } from '../helpers/codec-fixtures.js';
import { until } from '../helpers/until.js';
import { headOnly } from '../helpers/http.js';
import { startFakeDeepgram, type FakeDeepgram } from '../fakes/deepgram-server.js';
import { VOICE_MAX_BODY_BYTES, VOICE_PER_MINUTE } from '../../http/routes/voice.js';

const TRANSCRIBE = '/v2/voice-message/transcribe';
const SSE = '/v2/voice-messages';

interface Rig {
  ts: TestService;
  fake: FakeDeepgram;
  token: string;
  /** espeak-ng saying a sentence, 16 kHz mono, and the same as a WAV file's bytes. */
  voice: Int16Array;
  voiceWav: Buffer;
  silentWav: Buffer;
}

async function rig(t: Test, env: Record<string, string> = {}): Promise<Rig> {
  const fake = await startFakeDeepgram({ apiKey: 'dg-key' });
  t.teardown(() => fake.close());
  const ts = await startService(t, { env: { STT_PROVIDERS: 'provider_a,local', PROVIDER_A_API_KEY: 'dg-key', PROVIDER_A_URL: fake.url, ...env } });
  // Not t.testdir(): that would empty the service's data directory, its token key with it.
  const dir = mkdtempSync(path.join(tmpdir(), 'voice-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const voice = speak(dir, 'Remind me to buy milk tomorrow', 'voice');
  return {
    ts,
    fake,
    token: await ts.token('voice-user'),
    voice,
    voiceWav: readFileSync(writeWav(dir, 'voice-file', voice, 16000)),
    silentWav: readFileSync(writeWav(dir, 'silent-file', silence(3), 16000)),
  };
}

function form(files: { name: string; bytes: Uint8Array }[], language?: string): FormData {
  const f = new FormData();
  for (const file of files) f.append('files', new Blob([file.bytes]), file.name);
  if (language !== undefined) f.append('language', language);
  return f;
}

async function post(r: Rig, path: string, body: RequestInit['body'], init: { query?: string; headers?: Record<string, string>; token?: string | null } = {}): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  // A user of its own per request unless one is given, so only the budget test meets the per-user limit.
  const token = init.token === undefined ? await r.ts.token(`voice-${randomUUID()}`) : init.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return fetch(`${r.ts.url}${path}${init.query ?? ''}`, { method: 'POST', body, headers });
}

const json = (res: Response): Promise<any> => res.json();

/** The frames of a server-sent event stream, read to its end: `[field, value]` for each `field: value` block. */
async function sseFrames(res: Response): Promise<[string, string][]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const colon = block.indexOf(': ');
      return [block.slice(0, colon), block.slice(colon + 2)];
    });
}


/** Moves the service's clock past the provider deadline once the fake holds the request. */
async function expire(r: Rig, requests: number): Promise<void> {
  await until(() => r.fake.prerecorded.requests.length >= requests, { what: 'the request at the provider', timeoutMs: 20_000 });
  r.ts.clock.advance(60_001);
  await r.ts.service.scheduler.tick();
}

// One service for the whole file: its speech gate's first check loads the model, the slow part of a cold start.
// JSON routes take 1 KiB here; voice uploads keep their own bound.
const r = await rig(t, { MAX_BODY_BYTES: '1024' });

t.test('POST /v2/voice-message/transcribe', async (t) => {

  t.test('speech in a WAV file is transcribed by provider_a from exactly the audio sent', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Remind me to buy milk tomorrow.' });
    const res = await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'en'));
    t.equal(res.status, 200);
    t.same(await json(res), { transcript: 'Remind me to buy milk tomorrow.', language: 'en', stt_provider: 'provider_a', stt_model: 'nova-3', outcome: 'success' });
    const seen = r.fake.prerecorded.requests.at(-1)!;
    t.equal(seen.status, 200);
    t.equal(seen.query.get('language'), 'en');
    t.equal(seen.query.get('model'), 'nova-3');
    t.same(seen.samples, r.voice, 'the provider got the uploaded samples unchanged');
  });

  t.test('multi asks the provider to detect the language, and the answer names it', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Recuérdame comprar leche.', detectedLanguage: 'es' });
    const res = await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'auto'));
    const body = await json(res);
    t.equal(body.language, 'es');
    t.equal(r.fake.prerecorded.requests.at(-1)!.query.get('detect_language'), 'true');
  });

  t.test('a silent WAV is 200 expected_silence and never reaches the provider', async (t) => {
    const before = r.fake.prerecorded.requests.length;
    const res = await post(r, TRANSCRIBE, form([{ name: 'quiet.wav', bytes: r.silentWav }], 'en'));
    t.equal(res.status, 200);
    t.same(await json(res), { transcript: '', language: 'en', stt_provider: 'provider_a', stt_model: 'nova-3', outcome: 'expected_silence' });
    t.equal(r.fake.prerecorded.requests.length, before);
  });

  t.test('a .bin of real Opus packets is decoded and transcribed', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Remind me to buy milk.' });
    const ts = Math.floor(r.ts.clock.now() / 1000) - 60;
    const res = await post(r, TRANSCRIBE, form([{ name: `rec_${ts}_fs320.bin`, bytes: opusBinFile(r.voice, 320) }], 'en'));
    t.equal(res.status, 200);
    t.equal((await json(res)).transcript, 'Remind me to buy milk.');
    const seen = r.fake.prerecorded.requests.at(-1)!;
    const whole = Math.floor(r.voice.length / 320) * 320;
    t.equal(seen.samples!.length, whole, 'every 20 ms packet decoded to its 320 samples');
  });

  t.test('two files are transcribed as one message, in order', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Two parts.' });
    const ts = Math.floor(r.ts.clock.now() / 1000) - 60;
    const res = await post(r, TRANSCRIBE, form([{ name: 'a.wav', bytes: r.voiceWav }, { name: `b_${ts}.bin`, bytes: opusBinFile(r.voice, 160) }], 'en'));
    t.equal(res.status, 200);
    const seen = r.fake.prerecorded.requests.at(-1)!;
    t.equal(seen.samples!.length, r.voice.length + Math.floor(r.voice.length / 160) * 160);
    t.same(seen.samples!.subarray(0, r.voice.length), r.voice, 'the WAV first');
  });

  t.test('raw linear16 at 48 kHz stereo arrives as 16 kHz mono of the same duration', async (t) => {
    const mono48 = speech(t.testdir(), 48000, 'Call mom at six');
    const stereo = new Int16Array(mono48.length * 2);
    for (let i = 0; i < mono48.length; i++) stereo[2 * i] = stereo[2 * i + 1] = mono48[i]!;
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Call mom at six.' });
    const res = await post(r, TRANSCRIBE, Buffer.from(stereo.buffer), { query: '?language=en&encoding=linear16&sample_rate=48000&channels=2', headers: { 'content-type': 'application/octet-stream' } });
    t.equal(res.status, 200);
    t.equal((await json(res)).transcript, 'Call mom at six.');
    t.equal(r.fake.prerecorded.requests.at(-1)!.samples!.length, Math.round(mono48.length / 3));
  });

  t.test('undecodable input is 400 invalid_input with the fixed body', async (t) => {
    const cases: [string, () => Promise<Response>][] = [
      ['bytes that are not a WAV', () => post(r, TRANSCRIBE, form([{ name: 'x.wav', bytes: Buffer.from('definitely not audio') }]))],
      ['a .bin whose length prefix runs past its end', () => post(r, TRANSCRIBE, form([{ name: `x_${Math.floor(r.ts.clock.now() / 1000)}.bin`, bytes: Buffer.from([200, 0, 0, 0, 1, 2, 3]) }]))],
      ['a .bin without a timestamp', () => post(r, TRANSCRIBE, form([{ name: 'x.bin', bytes: opusBinFile(r.voice, 160) }]))],
      ['a .bin of packets libopus refuses', () => post(r, TRANSCRIBE, form([{ name: `x_${Math.floor(r.ts.clock.now() / 1000)}.bin`, bytes: Buffer.from([3, 0, 0, 0, 0xff, 0xff, 0xff]) }]))],
      ['a file type the route does not take', () => post(r, TRANSCRIBE, form([{ name: 'x.mp3', bytes: r.voiceWav }]))],
      ['a form without files', () => post(r, TRANSCRIBE, form([], 'en'))],
      ['an odd number of linear16 bytes', () => post(r, TRANSCRIBE, Buffer.alloc(3201), { headers: { 'content-type': 'application/octet-stream' } })],
      ['a rate outside 8000-48000', () => post(r, TRANSCRIBE, Buffer.alloc(3200), { query: '?sample_rate=96000', headers: { 'content-type': 'application/octet-stream' } })],
      ['an empty body', () => post(r, TRANSCRIBE, Buffer.alloc(0), { headers: { 'content-type': 'application/octet-stream' } })],
      ['a JSON body', () => post(r, TRANSCRIBE, '{"audio":"x"}', { headers: { 'content-type': 'application/json' } })],
    ];
    for (const [what, send] of cases) {
      const res = await send();
      t.equal(res.status, 400, what);
      t.equal(res.headers.get('x-error-code'), 'ENG_ERR_VOICE_INVALID_INPUT', what);
      const { detail } = await json(res);
      t.same(Object.keys(detail).sort(), ['error', 'message', 'outcome', 'provider', 'retryable'], what);
      t.match(detail, { error: 'stt_invalid_input', outcome: 'invalid_input', retryable: false }, what);
    }
  });

  t.test('provider failures map to their outcomes and never leak the provider body', async (t) => {
    const wav = (): FormData => form([{ name: 'note.wav', bytes: r.voiceWav }], 'en');
    r.fake.prerecorded.script({ kind: 'reject', status: 503, errMsg: 'secret internal detail req-123' });
    let res = await post(r, TRANSCRIBE, wav());
    t.equal(res.status, 502);
    const text = await res.text();
    t.same(JSON.parse(text).detail, { error: 'stt_upstream_error', outcome: 'upstream_error', provider: 'provider_a', retryable: true, message: 'The transcription provider failed.' });
    t.notMatch(text, /secret|req-123/);

    r.fake.prerecorded.script({ kind: 'garbage' });
    res = await post(r, TRANSCRIBE, wav());
    t.equal(res.status, 502, 'an answer that is not Deepgram JSON');
    t.equal((await json(res)).detail.outcome, 'upstream_error');

    r.fake.prerecorded.script({ kind: 'answer', transcript: '' });
    res = await post(r, TRANSCRIBE, wav());
    t.equal(res.status, 502);
    t.match((await json(res)).detail, { error: 'stt_empty_unexpected', outcome: 'empty_unexpected', retryable: true });

    r.fake.prerecorded.script({ kind: 'reject', status: 401 });
    res = await post(r, TRANSCRIBE, wav());
    t.equal(res.status, 503, 'a key the provider refuses is configuration');
    t.match((await json(res)).detail, { outcome: 'config_error', retryable: false });
  });

  t.test('a provider that never answers is 504 timeout on the service clock', async (t) => {
    r.fake.prerecorded.script({ kind: 'hold' });
    const pending = post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'en'));
    await expire(r, r.fake.prerecorded.requests.length + 1);
    const res = await pending;
    t.equal(res.status, 504);
    t.same((await json(res)).detail, { error: 'stt_timeout', outcome: 'timeout', provider: 'provider_a', retryable: true, message: 'The transcription provider did not answer in time.' });
  });

  t.test('a language no configured engine serves fails closed with 503', async (t) => {
    const before = r.fake.prerecorded.requests.length;
    const res = await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'xh'));
    t.equal(res.status, 503);
    t.match((await json(res)).detail, { error: 'stt_provider_configuration_error', outcome: 'config_error', provider: 'unknown', retryable: false });
    t.equal(r.fake.prerecorded.requests.length, before, 'no provider was asked');
  });

  t.test('no token, or a token the service did not issue, is 401', async (t) => {
    t.equal((await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }]), { token: null })).status, 401);
    const other = r.token.split('.').map((p, i) => (i === 2 ? p.split('').reverse().join('') : p)).join('.');
    t.equal((await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }]), { token: other })).status, 401);
  });

  t.test('voice outcomes are counted per provider', async (t) => {
    const metrics = await (await fetch(`${r.ts.url}/metrics`)).text();
    t.match(metrics, /voice_transcriptions_total\{provider="provider_a",outcome="success"\} [1-9]/);
    t.match(metrics, /voice_transcriptions_total\{provider="provider_a",outcome="expected_silence"\} 1/);
    t.match(metrics, /voice_transcriptions_total\{provider="unknown",outcome="config_error"\} 1/);
  });
});

t.test('POST /v2/voice-messages answers server-sent events', async (t) => {

  t.test('text comes as one message frame with the transcript as a chat message', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Remind me to buy milk tomorrow.' });
    const res = await post(r, SSE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'en'));
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /^text\/event-stream/);
    const frames = await sseFrames(res);
    t.equal(frames.length, 1);
    t.equal(frames[0]![0], 'message');
    const message = JSON.parse(Buffer.from(frames[0]![1], 'base64').toString('utf8'));
    t.match(message, { text: 'Remind me to buy milk tomorrow.', sender: 'human', type: 'text', language: 'en', stt_provider: 'provider_a', stt_model: 'nova-3' });
    t.match(message.id, /^[0-9a-f-]{36}$/);
  });

  t.test('silence is an empty stream', async (t) => {
    const res = await post(r, SSE, form([{ name: 'quiet.wav', bytes: r.silentWav }], 'en'));
    t.equal(res.status, 200);
    t.same(await sseFrames(res), []);
  });

  t.test('a failure is one terminal error frame with the same safe object', async (t) => {
    r.fake.prerecorded.script({ kind: 'reject', status: 500 });
    let frames = await sseFrames(await post(r, SSE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'en')));
    t.same(frames.map((f) => f[0]), ['error']);
    t.same(JSON.parse(frames[0]![1]), { error: 'stt_upstream_error', outcome: 'upstream_error', provider: 'provider_a', retryable: true, message: 'The transcription provider failed.' });
    frames = await sseFrames(await post(r, SSE, form([{ name: 'x.wav', bytes: Buffer.from('nope') }])));
    t.match(JSON.parse(frames[0]![1]), { outcome: 'invalid_input', provider: 'unknown' });
  });
});

t.test('uploads have their own size bound, and a per-user budget', async (t) => {

  t.test('larger than the JSON routes take, smaller than the voice bound: accepted', async (t) => {
    r.fake.prerecorded.script({ kind: 'answer', transcript: 'Fine.' });
    t.ok(r.voiceWav.length > 1024);
    const res = await post(r, TRANSCRIBE, form([{ name: 'note.wav', bytes: r.voiceWav }], 'en'));
    t.equal(res.status, 200);
  });

  t.test('past the voice bound: 413 before a byte of the body is read', async (t) => {
    // Declared only: the answer comes back while the client has sent nothing but the headers.
    const answer = await headOnly(r.ts.service.port, `POST ${TRANSCRIBE} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${r.token}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${VOICE_MAX_BODY_BYTES + 1}`);
    t.match(answer, /^HTTP\/1\.1 413 /);
    t.match(answer, /x-error-code: ENG_ERR_HTTP_BODY_TOO_LARGE/i);
  });

  t.test(`the ${VOICE_PER_MINUTE + 1}th message of a minute is 429, for both routes, per user`, async (t) => {
    const token = await r.ts.token('chatty-user');
    const empty = (path: string) => post(r, path, Buffer.alloc(0), { token, headers: { 'content-type': 'application/octet-stream' } });
    for (let i = 0; i < VOICE_PER_MINUTE; i++) {
      const res = await empty(i % 2 === 0 ? TRANSCRIBE : SSE);
      t.not(res.status, 429);
      await res.arrayBuffer();
    }
    const over = await empty(SSE);
    t.equal(over.status, 429);
    t.ok(Number(over.headers.get('retry-after')) >= 1);
    t.equal(over.headers.get('x-ratelimit-remaining'), '0');
    const another = await empty(TRANSCRIBE);
    t.equal(another.status, 429);
    const otherUser = await post(r, TRANSCRIBE, Buffer.alloc(0), { token: r.token, headers: { 'content-type': 'application/octet-stream' } });
    t.equal(otherUser.status, 400, 'another user has a budget of their own');
    r.ts.clock.advance(60_000);
    t.equal((await empty(TRANSCRIBE)).status, 400, 'the next minute opens the window again');
  });
});
