// Audio bytes webhooks of a live session streaming real Opus audio: every decoded sample reaches the endpoint as
// signed PCM16 windows of its `seconds` (the last, partial one when the session ends), with `sample_rate` and `uid`
// in the query; an endpoint that does not answer loses its oldest windows (counted) while the session streams on and
// holds no more than a bounded number of windows for it.
import t, { type Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { gate, startReceiver } from '../../helpers/webhook-receiver.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { frames, onChannel, sine } from '../../helpers/codec-fixtures.js';
import { AUDIO_WINDOWS_QUEUED_MAX } from '../../../engine/webhooks/live-audio.js';
import { FAKE_SONIOX_KEY, startFakeSoniox } from '../../fakes/soniox-server.js';

const ENV = { WEBHOOK_ALLOW_PRIVATE: 'on' };

async function setup(t: Test, uid: string, seconds: number, env: Record<string, string> = {}) {
  const engine = new RecordingSttEngine();
  const ts: TestService = await startService(t, { env: { ...ENV, ...env }, ...(Object.keys(env).length === 0 ? { sttEngines: [engine] } : {}) });
  const rx = await startReceiver(t);
  const h = bearer(await ts.token(uid));
  const saved = await ts.req('/v1/users/developer/webhook/audio_bytes', { method: 'POST', headers: h, body: { url: `${rx.url},${seconds}` } });
  t.equal(saved.status, 200);
  rx.secret = (await ts.req('/v1/users/developer/webhook-secret', { headers: h })).json.secret;
  return { engine, ts, rx };
}

/** Opus packets of `seconds` of a tone, 20 ms each. */
function opus(seconds: number): Uint8Array[] {
  const enc = new OpusEncoderStream(16000);
  return frames(sine(440, 16000, seconds, 8000), 320).map((f) => enc.encode(f));
}

/** A body's samples (little-endian PCM16). */
const samplesOf = (b: Buffer): number[] => Array.from(new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)));

/** The first `n` samples of a recording stream's chunks. */
function head(chunks: readonly Int16Array[], n: number): number[] {
  const out: number[] = [];
  for (const ch of chunks) {
    for (const x of ch) {
      if (out.length === n) return out;
      out.push(x);
    }
  }
  return out;
}

const metric = async (ts: TestService, name: string): Promise<number> => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await ts.req('/metrics')).text)?.[1] ?? 0);

t.test('every decoded sample reaches the endpoint in signed windows of its seconds, the last partial one at the end', async (t) => {
  const { engine, ts, rx } = await setup(t, 'a1', 1);
  const c = await open(ts, { uid: 'a1', codec: 'opus', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('a1')[0]!;
  t.equal(actor.liveWebhooks?.wantsPcm, true, 'the session brings its PCM to the webhooks');
  const packets = opus(3.5);
  for (const p of packets) c.ws.send(p);
  const stream = engine.streams[0]!;
  await until(() => stream.samples >= packets.length * 320 * 0.98, { what: 'decoded audio at the engine', timeoutMs: 20_000 });
  await until(() => rx.received.length >= 3, { what: 'three whole windows' });
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.sessionsOf('a1').length === 0, { what: 'the session ended' });
  await until(() => rx.received.reduce((n, r) => n + r.body.length, 0) >= stream.samples * 2, { what: 'the last window', timeoutMs: 10_000 });

  const total = rx.received.reduce((n, r) => n + r.body.length, 0);
  t.equal(total, stream.samples * 2, 'every decoded sample, two bytes each');
  t.ok(Math.abs(total / 2 - packets.length * 320) <= 16000, 'the audio sent, within one window');
  t.same(rx.received.slice(0, -1).map((r) => r.body.length), new Array(rx.received.length - 1).fill(32000), 'whole windows of one second at 16 kHz');
  t.ok(rx.received.at(-1)!.body.length < 32000, 'the partial last window at the end');
  for (const r of rx.received) {
    t.equal(r.headers['content-type'], 'application/octet-stream');
    t.equal(r.url.searchParams.get('sample_rate'), '16000');
    t.equal(r.url.searchParams.get('uid'), 'a1');
  }
  t.ok(rx.received.every((r) => r.verified), 'every window verifies (HMAC over the raw bytes)');
  t.equal(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, rx.received.length, 'a message id per window');
  // The PCM is the engine's: the first window's samples are the first samples the engine got.
  t.same(samplesOf(rx.received[0]!.body), head(stream.chunks, 16000), 'little-endian PCM16, the same samples');
});

t.test('a two-channel session sends channel 1 (the wearer) only', async (t) => {
  const { engine, ts, rx } = await setup(t, 'a4', 1);
  const c = await open(ts, { uid: 'a4', codec: 'opus', sample_rate: '16000', channels: '2' });
  await c.ready();
  const wearer = new OpusEncoderStream(16000);
  const remote = new OpusEncoderStream(16000);
  const one = frames(sine(440, 16000, 1.5, 8000), 320).map((f) => onChannel(1, wearer.encode(f)));
  const two = frames(sine(1000, 16000, 1.5, 8000), 320).map((f) => onChannel(2, remote.encode(f)));
  one.forEach((m, i) => {
    c.ws.send(m);
    c.ws.send(two[i]!);
  });
  await until(() => engine.streams.length === 2 && engine.streams.every((s) => s.samples >= 24000 * 0.98), { what: 'both channels at the engine', timeoutMs: 20_000 });
  c.close();
  await c.closed;
  const ch1 = engine.streams.find((x) => (x.options.channel ?? 0) === 0)!;
  const ch2 = engine.streams.find((x) => x.options.channel === 1)!;
  await until(() => rx.received.reduce((n, r) => n + r.body.length, 0) >= ch1.samples * 2, { what: 'every sample of channel 1', timeoutMs: 10_000 });
  t.equal(rx.received.reduce((n, r) => n + r.body.length, 0), ch1.samples * 2, 'one channel, not both');
  t.same(samplesOf(rx.received[0]!.body), head(ch1.chunks, 16000), "channel 1's samples");
  // Compared by hand: tap's notSame diffs the two arrays' renderings, which takes minutes at this length.
  const other = head(ch2.chunks, 16000);
  t.ok(samplesOf(rx.received[0]!.body).some((x, i) => x !== other[i]), "not channel 2's");
});

t.test('an endpoint that does not answer loses its oldest windows while the session streams on', async (t) => {
  const { engine, ts, rx } = await setup(t, 'a2', 1);
  const slow = gate();
  rx.answer = async () => {
    await slow.wait;
    return { status: 200 };
  };
  const c = await open(ts, { uid: 'a2', codec: 'opus', sample_rate: '16000' });
  await c.ready();
  const actor = ts.service.sessions.sessionsOf('a2')[0]!;
  const packets = opus(6);
  for (const p of packets) c.ws.send(p);
  const stream = engine.streams[0]!;
  await until(() => stream.samples >= packets.length * 320 * 0.98, { what: 'decoded audio at the engine', timeoutMs: 20_000 });
  await until(async () => (await metric(ts, 'webhook_audio_windows_dropped_total')) >= 2, { what: 'dropped windows counted' });
  t.equal(rx.received.length, 1, 'one request on the wire');
  t.ok(actor.liveWebhooks!.heldAudioBytes <= (AUDIO_WINDOWS_QUEUED_MAX + 1) * 32000, `held ${actor.liveWebhooks!.heldAudioBytes} bytes: the windows waiting and the one filling, no more`);

  // The session is untouched: a segment still reaches the device at the next step.
  stream.emit([{ text: 'Still here.', speaker: 'SPEAKER_00', start: 0.1, end: 0.9 }]);
  await advance(ts, 600);
  t.equal((await c.json((m) => Array.isArray(m)))[0].text, 'Still here.');
  t.equal(actor.state, 'streaming');

  slow.open();
  await until(() => rx.received.length >= 1 + AUDIO_WINDOWS_QUEUED_MAX, { what: 'the windows that waited' });
  await until(async () => rx.received.length + (await metric(ts, 'webhook_audio_windows_dropped_total')) === Math.floor(stream.samples / 16000), { what: 'every whole window sent or counted as dropped' });
  t.pass('every whole window sent or counted as dropped');
  t.ok(rx.received.every((r) => r.verified));
  c.close();
});

// A remote provider's socket normally lives in the codec shard, which sends the PCM on it without bringing it back
// here; a session with an audio_bytes endpoint keeps the socket on the main thread so the PCM reaches both.
t.test('with a remote provider, the provider and the endpoint both get every sample', async (t) => {
  const fake = await startFakeSoniox();
  t.teardown(() => fake.close());
  const { ts, rx } = await setup(t, 'a3', 1, { STT_PROVIDERS: 'provider_b', PROVIDER_B_URL: fake.url, PROVIDER_B_API_KEY: FAKE_SONIOX_KEY });
  const c = await open(ts, { uid: 'a3', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const pcm = sine(300, 16000, 2.5, 3000);
  for (let i = 0; i < pcm.length; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, Math.min(1600, pcm.length - i) * 2).slice());
  await until(
    async () => {
      await advance(ts, 100);
      return (fake.sessions[0]?.audioBytes ?? 0) >= pcm.length * 2 - 640;
    },
    { what: 'the audio at the provider', timeoutMs: 10_000 },
  );
  c.close();
  await c.closed;
  await until(() => rx.received.reduce((n, r) => n + r.body.length, 0) >= pcm.length * 2, { what: 'every sample at the endpoint', timeoutMs: 10_000 });
  const got = new Int16Array(new Uint8Array(Buffer.concat(rx.received.map((r) => r.body))).buffer);
  t.same(Array.from(got), Array.from(pcm), "the device's samples, in order");
  t.equal(rx.received.length, 3, 'two whole windows and the last half');
  t.ok(rx.received.every((r) => r.verified));
  await until(() => fake.sessions[0]!.closed, { what: 'the provider stream closed', timeoutMs: 10_000 });
  t.equal(fake.sessions[0]!.audioBytes, pcm.length * 2, 'and the provider got them all too');
});
