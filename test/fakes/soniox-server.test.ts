// The provider_b fake driven by the official Soniox SDK (@soniox/node), so the fake cannot drift from the real protocol.
import t, { type Test } from 'tap';
import { WebSocket } from 'ws';
import { AuthError, BadRequestError, ConnectionError, NetworkError, QuotaError, SonioxNodeClient, type RealtimeToken, type SttSessionConfig } from '@soniox/node';
import { ManualClock } from '../../engine/clock.js';
import { Scheduler } from '../../engine/scheduler.js';
import { until } from '../helpers/until.js';
import { FAKE_SONIOX_KEY, startFakeSoniox, type FakeSoniox, type FakeSonioxOptions } from './soniox-server.js';

// Node 20 has no global WebSocket; the SDK uses whatever is there, so give it ws (as its docs say for Node 20).
if (!('WebSocket' in globalThis)) Object.assign(globalThis, { WebSocket });

const CONFIG: SttSessionConfig = {
  model: 'stt-rt-v5',
  audio_format: 'pcm_s16le',
  sample_rate: 16000,
  num_channels: 1,
  enable_speaker_diarization: true,
  language_hints: ['en'],
};

/** `ms` of 16 kHz mono s16le audio as bytes. */
function audio(ms: number): Uint8Array {
  const pcm = new Int16Array(16 * ms).map((_, i) => Math.round(Math.sin(i / 8) * 3000));
  return new Uint8Array(pcm.buffer);
}

async function fakeFor(t: Test, opts: FakeSonioxOptions = {}): Promise<FakeSoniox> {
  const fake = await startFakeSoniox(opts);
  t.teardown(() => fake.close());
  return fake;
}

function sdk(fake: FakeSoniox, apiKey = FAKE_SONIOX_KEY): SonioxNodeClient {
  return new SonioxNodeClient({ api_key: apiKey, realtime: { ws_base_url: fake.url } });
}

/** A fake on a manual clock, and an SDK session connected to it whose next error is awaited. */
async function clockedSession(t: Test) {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const fake = await fakeFor(t, { clock, scheduler });
  const session = sdk(fake).realtime.stt(CONFIG);
  const error = nextError(session);
  await session.connect();
  return { clock, scheduler, fake, session, error };
}

/** The first error the session reports. */
function nextError(session: ReturnType<SonioxNodeClient['realtime']['stt']>): Promise<Error> {
  return new Promise((resolve) => session.once('error', resolve));
}

t.test('a stream with audio gets its tokens: non-final first, then final with speakers, then finished', async (t) => {
  const fake = await fakeFor(t);
  fake.script({
    tokens: [
      { text: 'How', start_ms: 100, end_ms: 300, speaker: 1 },
      { text: ' are', start_ms: 300, end_ms: 500, speaker: 1 },
      { text: ' you', start_ms: 500, end_ms: 700, speaker: 1 },
      { text: 'Fine', start_ms: 1200, end_ms: 1500, speaker: 2 },
    ],
  });
  const session = sdk(fake).realtime.stt(CONFIG);
  const tokens: RealtimeToken[] = [];
  session.on('token', (tk) => tokens.push(tk));
  await session.connect();
  for (let i = 0; i < 20; i++) session.sendAudio(audio(100));
  await session.finish();
  const rec = fake.sessions[0]!;
  t.match(rec.config, { api_key: FAKE_SONIOX_KEY, model: 'stt-rt-v5', audio_format: 'pcm_s16le', sample_rate: 16000, num_channels: 1 });
  t.equal(rec.audioBytes, 2000 * 32, 'two seconds of audio received');
  t.equal(rec.endOfAudio, 'text', 'the SDK ends the audio with an empty text frame');
  const finals = tokens.filter((tk) => tk.is_final);
  t.same(finals.map((tk) => tk.text).join(''), 'How are youFine');
  t.same(finals.map((tk) => tk.speaker), ['1', '1', '1', '2'], 'speakers are strings numbered from 1');
  t.same(finals.map((tk) => [tk.start_ms, tk.end_ms]), [[100, 300], [300, 500], [500, 700], [1200, 1500]]);
  t.ok(tokens.some((tk) => !tk.is_final), 'words are seen non-final before they are final');
  t.equal(session.state, 'finished');
  const last = rec.answers[rec.answers.length - 1]!;
  t.equal(last.finished, true);
  t.equal(last.final_audio_proc_ms, 2000);
  await until(() => rec.closed, { what: 'the fake to see the close' });
});

t.test('finalize answers the pending words as final and a <fin> marker; keepalive is accepted', async (t) => {
  const fake = await fakeFor(t);
  fake.script({ tokens: [{ text: 'Hello', start_ms: 0, end_ms: 400 }, { text: ' there', start_ms: 400, end_ms: 800 }], finalLagMs: 5000 });
  const session = sdk(fake).realtime.stt(CONFIG);
  const finals: string[] = [];
  session.on('token', (tk) => tk.is_final && finals.push(tk.text));
  await session.connect();
  session.sendAudio(audio(1000));
  session.keepAlive();
  const finalized = new Promise<void>((resolve) => session.once('finalized', resolve));
  session.finalize();
  await finalized;
  t.same(finals, ['Hello', ' there'], 'finalize made the words final before the lag');
  const rec = fake.sessions[0]!;
  t.equal(rec.finalizes, 1);
  t.equal(rec.keepalives.length, 1);
  t.equal(rec.error, undefined);
  await session.finish();
});

t.test('a bad key gets a 401 error frame and the connection closes', async (t) => {
  const fake = await fakeFor(t);
  const session = sdk(fake, 'wrong-key').realtime.stt(CONFIG);
  const error = nextError(session);
  await session.connect();
  const err = await error;
  t.type(err, AuthError);
  t.equal((err as AuthError).statusCode, 401);
  await until(() => fake.sessions[0]!.closed, { what: 'the fake to see the close' });
  t.same(fake.sessions[0]!.error, { code: 401, type: 'unauthenticated' });
});

t.test('the start request is validated: model, raw format needs rate and channels, language hints', async (t) => {
  const fake = await fakeFor(t);
  const cases: [string, SttSessionConfig, string][] = [
    ['unknown model', { ...CONFIG, model: 'no-such-model' }, 'model_not_available'],
    ['raw format without sample_rate', { ...CONFIG, sample_rate: undefined }, 'invalid_request'],
    ['raw format without num_channels', { ...CONFIG, num_channels: undefined }, 'invalid_request'],
    ['hint outside the language list', { ...CONFIG, language_hints: ['xx'] as never }, 'invalid_request'],
  ];
  for (const [name, config, type] of cases) {
    const session = sdk(fake).realtime.stt(config);
    const error = nextError(session);
    await session.connect();
    const err = await error;
    t.type(err, BadRequestError, name);
    t.equal(fake.sessions[fake.sessions.length - 1]!.error?.type, type, name);
  }
});

t.test('scripted error frames arrive as the SDK types them', async (t) => {
  const fake = await fakeFor(t);
  const cases: [number, string, new (...a: never[]) => Error][] = [
    [402, 'organization_balance_exhausted', QuotaError],
    [429, 'rate_limit_exceeded', QuotaError],
    [400, 'invalid_request', BadRequestError],
    [500, 'internal_error', NetworkError],
    [503, 'service_unavailable', NetworkError],
  ];
  for (const [code, type, cls] of cases) {
    fake.script({ error: { afterMs: 300, code, type, message: `scripted ${code}` } });
    const session = sdk(fake).realtime.stt(CONFIG);
    const error = nextError(session);
    await session.connect();
    session.sendAudio(audio(200));
    session.sendAudio(audio(200));
    const err = await error;
    t.type(err, cls, `${code}`);
    t.equal((err as QuotaError).statusCode, code);
  }
});

t.test('a connection refused at the upgrade with 429 fails connect()', async (t) => {
  const fake = await fakeFor(t);
  fake.script({ refuse: { status: 429, retryAfterS: 2 } });
  const session = sdk(fake).realtime.stt(CONFIG);
  await t.rejects(session.connect(), ConnectionError);
  t.equal(fake.upgrades.length, 1);
  t.equal(fake.sessions.length, 0);
});

t.test('a mid-stream drop is a lost connection for the SDK', async (t) => {
  const fake = await fakeFor(t);
  fake.script({ drop: { afterMs: 500 } });
  const session = sdk(fake).realtime.stt(CONFIG);
  const error = nextError(session);
  await session.connect();
  session.sendAudio(audio(300));
  session.sendAudio(audio(300));
  t.type(await error, ConnectionError);
  t.equal(fake.sessions[0]!.dropped, true);
});

t.test('the idle watchdog: 20 s without audio or keepalive closes the stream (408), keepalive postpones it', async (t) => {
  const { clock, scheduler, fake, session, error } = await clockedSession(t);
  session.sendAudio(audio(100));
  await until(() => fake.sessions[0]?.audioBytes === 3200, { what: 'the audio' });
  clock.advance(15000);
  await scheduler.tick();
  session.keepAlive();
  await until(() => fake.sessions[0]!.keepalives.length === 1, { what: 'the keepalive' });
  clock.advance(15000);
  await scheduler.tick();
  t.equal(fake.sessions[0]!.error, undefined, '30 s after the audio but 15 s after a keepalive: still open');
  clock.advance(6000);
  await scheduler.tick();
  const err = await error;
  t.type(err, NetworkError);
  t.equal((err as NetworkError).statusCode, 408);
});

t.test('a stream that never sends audio is closed with 400 "No audio received"', async (t) => {
  const { clock, scheduler, fake, error } = await clockedSession(t);
  await until(() => fake.sessions[0]?.config !== undefined, { what: 'the start request' });
  clock.advance(21000);
  await scheduler.tick();
  const err = await error;
  t.type(err, BadRequestError);
  t.match(err.message, /no audio/i);
});

t.test('the documented connection auth (Authorization: Bearer, no api_key in the start request) is accepted', async (t) => {
  const fake = await fakeFor(t);
  fake.script({ tokens: [{ text: 'Hi', start_ms: 0, end_ms: 200 }] });
  const connect = (key: string, startKey?: string) => new Promise<Record<string, unknown>[]>((resolve, reject) => {
    const ws = new WebSocket(fake.url, { headers: { authorization: `Bearer ${key}` } });
    const answers: Record<string, unknown>[] = [];
    ws.on('error', reject);
    ws.on('message', (data) => answers.push(JSON.parse(String(data)) as Record<string, unknown>));
    ws.on('close', () => resolve(answers));
    ws.on('open', () => {
      ws.send(JSON.stringify({ ...CONFIG, ...(startKey ? { api_key: startKey } : {}) }));
      ws.send(audio(500));
      ws.send('');
    });
  });
  const ok = await connect(FAKE_SONIOX_KEY);
  t.equal(ok[ok.length - 1]!.finished, true);
  t.ok(ok.some((a) => (a.tokens as { text: string; is_final: boolean }[]).some((tk) => tk.text === 'Hi' && tk.is_final)));
  const refused = await connect('wrong-key', FAKE_SONIOX_KEY);
  t.match(refused, [{ error_code: 401 }], 'the key sent with the connection is the one that counts');
});

t.test('bench mode: a sentence every 2 s of audio, counts and lateness over HTTP /stats, nothing recorded', async (t) => {
  const fake = await fakeFor(t, { record: false, fallback: { fillerEveryS: 2 } });
  const session = sdk(fake).realtime.stt(CONFIG);
  const finals: RealtimeToken[] = [];
  session.on('token', (tk) => tk.is_final && finals.push(tk));
  await session.connect();
  for (let i = 0; i < 50; i++) session.sendAudio(audio(100));
  await session.finish();
  // Words at 0, 2 and 4 s (400 ms each): the last one is made final by the end of audio.
  t.same(finals.map((tk) => [tk.text, tk.start_ms, tk.end_ms]), [['Bench.', 0, 400], [' Bench.', 2000, 2400], [' Bench.', 4000, 4400]]);
  t.same(fake.sessions, [], 'no record kept');
  const http = `http://${new URL(fake.url).host}`;
  const stats = (await (await fetch(`${http}/stats`)).json()) as Record<string, unknown>;
  t.match(stats, { streamsOpened: 1, bytes: 5000 * 32, chunks: 50, lagMs: { count: 50 } });
  const reset = (await (await fetch(`${http}/stats/reset`, { method: 'POST' })).json()) as Record<string, unknown>;
  t.match(reset, { ok: true, bytes: 5000 * 32, chunks: 50 }, 'the reset answers what it reset');
  t.match(fake.stats(), { streamsOpened: 0, bytes: 0, chunks: 0, lagMs: { count: 0 } });
});

t.test("bench mode's lateness: each frame's arrival beyond its stream's least-delayed frame, by the injected clock", async (t) => {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const fake = await fakeFor(t, { clock, scheduler, record: false, fallback: { fillerEveryS: 2 } });
  const session = sdk(fake).realtime.stt(CONFIG);
  await session.connect();
  // A second of audio at once (each frame earlier than the one before: none late), then a frame 1 s of clock later
  // that carries only 100 ms more audio: 900 ms late.
  for (let i = 0; i < 10; i++) session.sendAudio(audio(100));
  await until(() => fake.stats().chunks === 10, { what: 'ten frames' });
  t.match(fake.stats().lagMs, { count: 10, max: 0 });
  clock.advance(1000);
  session.sendAudio(audio(100));
  await until(() => fake.stats().chunks === 11, { what: 'the late frame' });
  t.match(fake.stats().lagMs, { count: 11, max: 900 });
  await session.finish();
});
