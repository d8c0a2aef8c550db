// The service with real provider clients against the faithful provider fakes: a device on /v4/listen streams audio,
// scripted words come back as segments; a refused provider hands over; a dropped one loses no word.
import { until } from '../../helpers/until.js';
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { ManualClock } from '../../../engine/clock.js';
import { bearer } from '../../helpers/http.js';
import { advance, open, type ListenClient } from '../../helpers/listen.js';
import { sine } from '../../helpers/codec-fixtures.js';
import { startFakeCustomStt } from '../../fakes/custom-stt-server.js';
import { FAKE_SONIOX_KEY, startFakeSoniox, type FakeSoniox } from '../../fakes/soniox-server.js';

async function soniox(t: Test): Promise<FakeSoniox> {
  const fake = await startFakeSoniox();
  t.teardown(() => fake.close());
  return fake;
}

const providerB = (fake: FakeSoniox, list = 'provider_b'): Record<string, string> => ({ STT_PROVIDERS: list, PROVIDER_B_URL: fake.url, PROVIDER_B_API_KEY: FAKE_SONIOX_KEY });

/** Sends `seconds` of 16 kHz pcm16 in 100 ms messages. */
function stream(c: ListenClient, seconds: number): void {
  const pcm = sine(300, 16000, seconds, 3000);
  for (let i = 0; i < pcm.length; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, Math.min(1600, pcm.length - i) * 2).slice());
}

async function transcript(ts: TestService, id: string): Promise<{ text: string; speaker_id: number; start: number }[]> {
  const r = await ts.req(`/v1/dev/user/conversations/${id}?include_transcript=true`, { headers: bearer(await ts.token('u1')) });
  return r.status === 200 ? ((r.json as any).transcript_segments ?? []) : [];
}

const words = (speaker: number, at: number, ...texts: string[]) => texts.map((text, i) => ({ text, start_ms: at + i * 300, end_ms: at + i * 300 + 250, speaker }));

// The codec shard that decodes the session holds the provider_b socket: it connects, sends the config frame before any
// audio, and the decoded PCM itself.
t.test('provider_b: scripted words arrive as segments with their speakers; ready names the provider', async (t) => {
  const fake = await soniox(t);
  fake.script({ tokens: [...words(1, 100, 'Hello', ' there', '.'), ...words(2, 1200, ' Hi', ' back', '.')], finalLagMs: 500 });
  const ts = await startService(t, { env: providerB(fake) });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  t.same(await c.ready(), { type: 'service_status', status: 'ready', provider: 'provider_b' });
  stream(c, 3);
  // Each stream's first message has a length of its own (engine/stt/types.ts staggerFirst): the last rest goes out
  // once its hold runs out, unless it is under 20 ms (it waits for more audio).
  await until(async () => {
    await advance(ts, 100);
    return (fake.sessions[0]?.audioBytes ?? 0) >= 96_000 - 640;
  }, { what: 'all three seconds', timeoutMs: 10_000 });
  t.equal(fake.sessions[0]!.config?.sample_rate, 16000, 'the provider was told the format');
  t.equal(fake.sessions[0]!.misalignedFrames, 0, 'whole samples only');
  const got = new Int16Array(new Uint8Array(Buffer.concat(fake.sessions[0]!.audio)).buffer);
  t.same(got, sine(300, 16000, 3, 3000).subarray(0, got.length), 'the device’s samples, in order');
  const { stats } = ts.service.sessions.sessionsOf('u1')[0]!;
  // The shard sends before it answers: the main thread may learn of the last batch after the fake has it.
  await until(() => stats.uplinkedSamples >= 48_000 - 640, { what: 'the shard’s answers', timeoutMs: 10_000 });
  t.ok(stats.uplinkedSamples >= 48_000 - 640, `the codec shard sent the PCM itself (${stats.uplinkedSamples} samples)`);
  const seen: any[] = [];
  await until(async () => {
    await advance(ts, 600);
    const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
    if (m) seen.push(...m);
    return seen.some((s) => s.text.includes('back'));
  }, { what: 'segments', timeoutMs: 10_000 });
  const last = new Map(seen.map((s) => [s.id, s]));
  t.match([...last.values()], [{ text: 'Hello there.', speaker: 'SPEAKER_00', stt_provider: 'provider_b' }, { text: 'Hi back.', speaker: 'SPEAKER_01' }]);
  c.close();
  await c.closed;
  await until(() => fake.sessions[0]!.closed, { what: 'the provider stream closed', timeoutMs: 10_000 });
  t.equal(fake.sessions[0]!.audioBytes, 96_000, 'every sample reached the provider before the end of audio');
  t.equal(fake.sessions[0]!.endOfAudio, 'text', 'the end of audio was the empty text frame');
  t.equal(fake.sessions[0]!.error, undefined, 'and nothing the provider refused');

  // Usage: the seconds the provider received and the words it gave, for this user, provider and day.
  await until(async () => {
    const r = await ts.req('/v1/users/usage', { headers: bearer(await ts.token('u1')) });
    return (r.json as any)?.total?.words === 4;
  }, { what: 'usage recorded', timeoutMs: 10_000 });
  const usage = (await ts.req('/v1/users/usage', { headers: bearer(await ts.token('u1')) })).json as any;
  t.match(usage.days, [{ provider: 'provider_b', words: 4 }]);
  t.ok(Math.abs(usage.days[0].audio_seconds - 3) < 0.05, `3 s of audio billed (${usage.days[0].audio_seconds})`);
});

t.test('custom_stt=enabled with CUSTOM_STT_URL: the app codec bytes go to the custom server unchanged, its segments come back', async (t) => {
  const custom = await startFakeCustomStt();
  t.teardown(() => custom.close());
  custom.script = { afterFrame: { 1: [{ json: { segments: [{ text: 'From my own server.', speaker: 'SPEAKER_02', start: 0.1, end: 0.9 }] } }] } };
  const ts = await startService(t, { env: { CUSTOM_STT_URL: custom.url } });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000', custom_stt: 'enabled' });
  await c.ready();
  const frames = [new Uint8Array(3200).fill(7), new Uint8Array(3200).fill(9)];
  for (const f of frames) c.ws.send(f);
  const conn = custom.connections[0]!;
  await conn.waitForFrames(2);
  t.same(conn.frames.map((f) => [f.length, f[0]]), [[3200, 7], [3200, 9]], 'bytes unchanged, in order');
  t.equal(conn.query.get('codec'), 'pcm16');
  await until(async () => {
    await advance(ts, 600);
    const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
    return m?.some((s: any) => s.text === 'From my own server.' && s.stt_provider === 'custom' && s.speaker === 'SPEAKER_02') ?? false;
  }, { what: 'custom segments', timeoutMs: 10_000 });
  c.close();
  t.equal(await conn.closeStream, 2, 'CloseStream after the two frames');
});

t.test('a provider refusing at connect hands over to the next one before audio is accepted', async (t) => {
  const fake = await soniox(t);
  fake.script({ refuse: { status: 401 } });
  const ts = await startService(t, { env: providerB(fake, 'provider_b,local') });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  t.same(await c.ready(), { type: 'service_status', status: 'ready', provider: 'local', reason: 'fallback_from_provider_b' });
  t.equal(fake.upgrades.length, 1, 'a bad key is not retried');
  c.close();
  await c.closed;
});

t.test('provider dropped mid-stream: stt_failed, 1011, and the kept audio is transcribed later so no scripted word is lost', async (t) => {
  const fake = await soniox(t);
  // The live stream: the first sentence turns final, then the connection drops with the second unanswered.
  fake.script({ tokens: [...words(1, 100, 'Before', ' the', ' drop', '.'), ...words(1, 2600, ' Never', ' heard', '.')], finalLagMs: 300, drop: { afterMs: 3000 } });
  // The job's stream over the kept audio: its words, in the kept audio's own time.
  fake.script({ tokens: words(1, 200, 'After', ' the', ' drop', '.') });
  const ts = await startService(t, { env: providerB(fake) });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  stream(c, 2);
  await until(async () => {
    await advance(ts, 600);
    const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
    return m?.some((s: { text: string }) => s.text === 'Before the drop.') ?? false;
  }, { what: 'the answered sentence reached the device', timeoutMs: 10_000 });
  stream(c, 2);
  t.match(await c.json((m) => m.status === 'stt_failed', 10_000), { outcome: 'upstream_error', provider: 'provider_b', retryable: true, reason: 'connection_lost' });
  t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });
  await until(() => fake.sessions.length === 2 && fake.sessions[1]!.closed, { what: 'the kept audio streamed by the job', timeoutMs: 20_000 });
  const kept = fake.sessions[1]!.audioBytes / 32_000;
  t.ok(kept > 0.9 && kept < 2.9, `the job sent only what the provider had not answered for (${kept.toFixed(2)} s)`);
  const id = (await ts.service.services.conversations.latestWithStatus('u1', 'in_progress'))?.id;
  t.ok(id, 'the conversation stays open for the device to resume');
  await until(async () => (await transcript(ts, id!)).length === 2, { what: 'both sentences stored', timeoutMs: 10_000 });
  const segs = await transcript(ts, id!);
  t.match(segs, [{ text: 'Before the drop.' }, { text: 'After the drop.' }]);
  t.ok(segs[1]!.start > segs[0]!.start, 'the kept words come after the answered ones');
});

t.test('provider_a: a 12 s pause is bridged by KeepAlive, then 429 at connect is retried and words keep coming', async (t) => {
  const { startFakeDeepgram } = await import('../../fakes/deepgram-server.js');
  const clock = new ManualClock(Date.now());
  const fake = await startFakeDeepgram({ clock, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const say = (afterS: number, word: string, start: number) => ({ afterS, words: [{ word: word.toLowerCase().replace('.', ''), punctuated_word: word, speaker: 0, start, end: start + 0.4 }] });
  // Results a little before each whole second: a rest under 20 ms may wait in the client for more audio.
  fake.script({ kind: 'accept', results: [say(0.95, 'Before.', 0.2), say(1.95, 'After.', 1.3)] });
  const ts = await startService(t, { clock, env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' } });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  t.same(await c.ready(), { type: 'service_status', status: 'ready', provider: 'provider_a' });
  stream(c, 1);
  await until(async () => {
    await advance(ts, 100); // the rest after a first message of its own length (see above)
    return (fake.streams[0]?.bytes ?? 0) >= 32_000 - 640;
  }, { what: 'first second', timeoutMs: 10_000 });
  for (let s = 0; s < 12; s++) {
    await advance(ts, 1000);
    // Let what the client sent reach the fake before its idle rule looks (socket I/O, not a timeout).
    await new Promise((r) => setTimeout(r, 5));
    fake.sweep();
  }
  const dg = fake.streams[0]!;
  t.ok(dg.open, 'the provider stream survived the pause');
  t.ok(dg.keepAlives >= 1, `KeepAlive sent during the pause (${dg.keepAlives})`);
  stream(c, 1);
  const seen: string[] = [];
  await until(async () => {
    await advance(ts, 600);
    const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
    if (m) seen.push(...m.map((s: { text: string }) => s.text));
    return seen.some((x) => x.includes('After.'));
  }, { what: 'words after the pause', timeoutMs: 10_000 });
  c.close();
  await c.closed;

  fake.script({ kind: 'reject', status: 429, retryAfter: '2' }, { kind: 'accept', results: [] });
  const d = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await until(() => fake.attempts.length === 2, { what: 'the refused attempt' });
  // The refusal reaches the client a moment after the fake counted it; only then does the 2 s backoff start.
  await until(async () => {
    await advance(ts, 500);
    return fake.attempts.length === 3;
  }, { what: 'the retry', timeoutMs: 10_000 });
  t.same(await d.ready(), { type: 'service_status', status: 'ready', provider: 'provider_a' }, 'served after the retry, no fallback');
  t.equal(fake.attempts.length, 3, 'one refused attempt and one accepted (plus the first session)');
  d.close();
  await d.closed;
  // The sessions drain on the service's clock (Finalize and CloseStream waits are bounded by it): move it until they
  // are gone, as time would, or the shutdown in teardown waits on a clock that never moves.
  await until(async () => {
    await advance(ts, 1000);
    return ts.service.sessions.size === 0;
  }, { what: 'both sessions drained', timeoutMs: 20_000 });
});

// The session's PCM goes onto the provider_a socket from the codec shard, and a drop must still keep exactly the audio
// the provider never answered for, no sample twice or missing.
t.test("provider_a: the provider gets the device's samples; a drop keeps exactly the unanswered rest", async (t) => {
  const { startFakeDeepgram } = await import('../../fakes/deepgram-server.js');
  const fake = await startFakeDeepgram({ recordAudio: true, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const say = { afterS: 0.95, words: [{ word: 'before', punctuated_word: 'Before.', speaker: 0, start: 0.2, end: 0.6 }] };
  // Final results up to 0.95 s, then the connection drops once 2.5 s arrived; the job's stream takes the rest.
  fake.script({ kind: 'accept', results: [say], dropAfterBytes: 2.5 * 32_000 }, { kind: 'accept', results: [] });
  const ts = await startService(t, { env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' } });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  // Noise, not a tone: a tail shifted by whole periods of a tone would still compare equal.
  const pcm = new Int16Array(4 * 16_000);
  let seed = 7;
  for (let i = 0; i < pcm.length; i++) pcm[i] = ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) - 32768;
  const send = (from: number, to: number): void => {
    for (let i = from; i < to; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, 3200).slice());
  };
  send(0, 32_000);
  await until(async () => {
    await advance(ts, 100);
    return (fake.streams[0]?.resultsSent ?? 0) >= 1 && (fake.streams[0]?.bytes ?? 0) >= 64_000 - 3200;
  }, { what: 'the first two seconds and the final result', timeoutMs: 10_000 });
  const live = fake.streams[0]!;
  t.same(new Int16Array(new Uint8Array(Buffer.concat(live.audio)).buffer), pcm.subarray(0, live.bytes / 2), 'the live stream got the device’s samples in order');
  send(32_000, 64_000);
  t.match(await c.json((m) => m.status === 'stt_failed', 10_000), { provider: 'provider_a', reason: 'connection_lost' });
  t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });
  await until(() => fake.streams.length === 2 && !fake.streams[1]!.open, { what: 'the kept audio streamed by the job', timeoutMs: 20_000 });
  const kept = new Int16Array(new Uint8Array(Buffer.concat(fake.streams[1]!.audio)).buffer);
  t.equal(kept.length, pcm.length - 0.95 * 16_000, 'everything after the last final result, once');
  t.same(kept, pcm.subarray(0.95 * 16_000), 'the same samples, in order');
});
