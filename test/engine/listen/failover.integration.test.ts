// Opening speech streams with retries and fail-over, and audio kept when a provider dies mid-session, over a real socket.
import { until } from '../../helpers/until.js';
import t from 'tap';
import { readdirSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startService } from '../../helpers/service.js';
import { bearer } from '../../helpers/http.js';
import { advance, open } from '../../helpers/listen.js';
import { RecordingSttEngine } from '../../fakes/recording-stt.js';
import { concat, frames, onChannel, sine, speech } from '../../helpers/codec-fixtures.js';
import { OpusEncoderStream } from '../../../native/opus.js';
import { SttOpenError } from '../../../engine/stt/types.js';
import { backoffMs } from '../../../engine/stt/failover.js';

const rateLimited = (retryAfterMs?: number): SttOpenError => new SttOpenError({ outcome: 'upstream_error', retryable: true, reason: 'provider_rate_limited' }, 'rate limited', retryAfterMs);
const badKey = (): SttOpenError => new SttOpenError({ outcome: 'config_error', retryable: false, reason: 'provider_auth' });

/** One second of pcm16 audio at 16 kHz. */
const second = new Uint8Array(sine(220, 16000, 1, 3000).buffer);

t.test('backoff: exponential with jitter, capped at 32 s, stretched to Retry-After', async (t) => {
  t.equal(backoffMs(1, () => 0), 1000);
  t.equal(backoffMs(2, () => 0.5), 2500);
  t.equal(backoffMs(3, () => 0.999), 4999);
  t.equal(backoffMs(9, () => 0), 32_000);
  t.equal(backoffMs(1, () => 0, 7000), 7000, 'Retry-After wins when longer');
  t.equal(backoffMs(1, () => 0, 90_000), 32_000, 'but never past the cap');
});

t.test('a refused preferred provider hands over before audio is accepted; ready names the one serving', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  const b = new RecordingSttEngine('provider_b');
  a.openErrors.push(badKey());
  const ts = await startService(t, { sttEngines: [a, b] });
  const c = await open(ts, { uid: 'u1' });
  const ready = await c.ready();
  t.same(ready, { type: 'service_status', status: 'ready', provider: 'provider_b', reason: 'fallback_from_provider_a' });
  t.equal(a.attempts, 1, 'a bad key is not retried');
  t.equal(b.streams.length, 1);
  c.close();
  await c.closed;

  const d = await open(ts, { uid: 'u1', stt_service: 'provider_b' });
  t.same(await d.ready(), { type: 'service_status', status: 'ready', provider: 'provider_b' }, 'the chosen provider, no fallback');
  d.close();
  await d.closed;
});

t.test('429 at connect is retried with backoff; every engine failing ends in stt_failed', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  a.openErrors.push(rateLimited(), rateLimited(3000));
  const ts = await startService(t, { sttEngines: [a] });
  const c = await open(ts, { uid: 'u1' });
  await until(() => a.attempts === 1, { what: 'first attempt', timeoutMs: 5000 });
  await advance(ts, 999);
  t.equal(a.attempts, 1, 'no retry before the first backoff');
  await advance(ts, 1001);
  await until(() => a.attempts === 2, { what: 'second attempt after 1–2 s', timeoutMs: 5000 });
  await advance(ts, 2999);
  t.equal(a.attempts, 2, 'Retry-After (3 s) is honoured');
  await advance(ts, 1);
  t.same(await c.ready(), { type: 'service_status', status: 'ready', provider: 'provider_a' });
  t.equal(a.attempts, 3);
  c.close();
  await c.closed;

  a.openErrors.push(rateLimited(), rateLimited(), rateLimited());
  const d = await open(ts, { uid: 'u1' });
  for (let i = 0; i < 4 && a.attempts < 6; i++) {
    await until(() => a.attempts >= 4 + i || a.attempts === 6, { what: `attempt ${4 + i}`, timeoutMs: 5000 });
    await advance(ts, 5000);
  }
  t.match(await d.json((m) => m.status === 'stt_failed'), { outcome: 'upstream_error', provider: 'provider_a', retryable: true, reason: 'provider_rate_limited' });
  t.same(await d.closed, { code: 1011, reason: 'transcription_service_unavailable' });
  t.equal(a.attempts, 6, 'three attempts per session');
});

t.test('the client leaving during backoff stops further attempts', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  a.openErrors.push(rateLimited(), rateLimited());
  const ts = await startService(t, { sttEngines: [a] });
  const c = await open(ts, { uid: 'u1' });
  await until(() => a.attempts === 1, { what: 'first attempt', timeoutMs: 5000 });
  c.close();
  await c.closed;
  await until(() => ts.service.sessions.size === 0, { what: 'session gone', timeoutMs: 5000 });
  await advance(ts, 40_000);
  await advance(ts, 40_000);
  t.equal(a.attempts, 1, 'no attempt after the client left');
  t.equal(a.streams.length, 0, 'no stream left open');
});

t.test('a provider lost mid-session: stt_failed, 1011, and the unanswered audio is transcribed into the conversation later', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  const b = new RecordingSttEngine('provider_b');
  const ts = await startService(t, { sttEngines: [a, b] });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  for (let i = 0; i < 3; i++) c.ws.send(second);
  const live = a.streams[0]!;
  await until(() => live.samples === 48_000, { what: 'three seconds decoded', timeoutMs: 10_000 });
  live.emit([{ text: 'Before the drop.', speaker: 'SPEAKER_00', start: 0.2, end: 1.4 }]);
  live.acknowledged = 24_000; // the provider answered for the first 1.5 s only
  await advance(ts, 600);
  const conversationId = ts.service.sessions.sessionsOf('u1')[0]!.conversationId!;
  t.ok(conversationId, 'a conversation is open');

  // The engine that picks the kept audio up answers for it when finalized.
  let keptSamples = 0;
  a.autoAnswer = (s) => {
    keptSamples = s.samples;
    return [{ text: 'After the drop.', speaker: 'SPEAKER_01', start: 0.5, end: 1.2 }];
  };
  live.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  t.match(await c.json((m) => m.status === 'stt_failed'), { type: 'service_status', status_text: 'Transcription service unavailable', outcome: 'upstream_error', provider: 'provider_a', retryable: true, reason: 'connection_lost' });
  t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });

  await until(() => keptSamples > 0, { what: 'kept audio transcribed by the job', timeoutMs: 20_000 });
  t.equal(keptSamples, 24_000, 'exactly the 1.5 s the provider never answered for');
  const metrics = (await ts.req('/metrics')).text;
  t.match(metrics, /^stt_stream_failures_total\{provider="provider_a",reason="connection_lost"\} 1$/m, 'the failure is counted by provider and reason');
  t.match(metrics, /^stt_kept_audio_seconds_total\{provider="provider_a"\} 1\.5$/m, 'and the seconds kept for later');
  const keptDir = path.join(ts.dataDir, 'kept-audio');
  await until(() => !existsSync(keptDir) || readdirSync(keptDir).length === 0, { what: 'kept files removed', timeoutMs: 10_000 });
  const token = await ts.token('u1');
  await until(async () => {
    const r = await ts.req(`/v1/dev/user/conversations/${conversationId}?include_transcript=true`, { headers: bearer(token) });
    return r.status === 200 && (r.json as any).transcript_segments?.length === 2;
  }, { what: 'both segments stored', timeoutMs: 10_000 });
  const r = await ts.req(`/v1/dev/user/conversations/${conversationId}?include_transcript=true`, { headers: bearer(token) });
  const segs = (r.json as any).transcript_segments;
  t.match(segs, [{ text: 'Before the drop.', speaker_id: 0, start: 0.2 }, { text: 'After the drop.', speaker_id: 1 }]);
  t.ok(segs[1].start >= 1.5 + 0.5 - 0.01 && segs[1].start <= 2.2, `kept segment placed at conversation time (${segs[1].start})`);
});

t.test('a provider lost while the session drains (its client left) still has its unanswered audio kept', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  const ts = await startService(t, { sttEngines: [a] });
  const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  for (let i = 0; i < 3; i++) c.ws.send(second);
  const live = a.streams[0]!;
  await until(() => live.samples === 48_000, { what: 'three seconds decoded', timeoutMs: 10_000 });
  live.acknowledged = 16_000; // the provider answered for the first second only
  let release!: () => void;
  live.finalizeGate = new Promise((r) => (release = r));
  let keptSamples = 0;
  a.autoAnswer = (s) => {
    keptSamples = s.samples;
    return [];
  };
  c.close();
  await until(() => live.finalized, { what: 'the drain asked the provider to finalize', timeoutMs: 10_000 });
  // The provider drops while it finalizes: the last two seconds were never answered for.
  live.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  release();
  await until(() => keptSamples > 0, { what: 'kept audio transcribed by the job', timeoutMs: 20_000 });
  t.equal(keptSamples, 32_000, 'exactly the 2 s the provider never answered for');
  const metrics = (await ts.req('/metrics')).text;
  t.match(metrics, /^stt_kept_audio_seconds_total\{provider="provider_a"\} 2$/m, 'counted as kept');
  t.match(metrics, /^stt_stream_failures_total\{provider="provider_a",reason="connection_lost"\} 1$/m);
});

t.test('unanswered audio is kept encoded and decoded again on failure: the same samples the provider was sent', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  const ts = await startService(t, { sttEngines: [a] });
  const dir = mkdtempSync(path.join(tmpdir(), 'kept-opus-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pcm = speech(dir, 16000).subarray(0, 3 * 16000);
  // Two channels, each its own Opus stream of 20 ms packets: the wearer's speech and, on channel 2, a tone.
  const enc1 = new OpusEncoderStream(16000);
  const enc2 = new OpusEncoderStream(16000);
  const ch1 = frames(pcm, 320).map((f) => onChannel(1, enc1.encode(f)));
  const ch2 = frames(sine(300, 16000, 3, 6000), 320).map((f) => onChannel(2, enc2.encode(f)));
  const c = await open(ts, { uid: 'u1', codec: 'opus_fs320', sample_rate: '16000', channels: '2' });
  await c.ready();
  ch1.forEach((m, i) => {
    c.ws.send(m);
    c.ws.send(ch2[i]!);
  });
  const [live1, live2] = a.streams;
  await until(() => live1!.samples === 48_000 && live2!.samples === 48_000, { what: 'three seconds decoded on both channels', timeoutMs: 10_000 });
  const sent1 = concat(live1!.chunks);
  const sent2 = concat(live2!.chunks);
  live1!.acknowledged = 24_000; // answered up to 1.5 s on channel 1, 2.25 s on channel 2
  live2!.acknowledged = 36_000;
  await advance(ts, 600);
  a.autoAnswer = () => [];
  const keptStreams = a.streams.length;
  live1!.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });
  await until(() => a.streams.length >= keptStreams + 2 && a.streams.slice(keptStreams).every((s) => s.finalized), { what: 'both channels\' kept audio transcribed', timeoutMs: 20_000 });
  const got = a.streams.slice(keptStreams).map((s) => concat(s.chunks)).sort((x, y) => y.length - x.length);
  t.same(got.map((g) => g.length), [24_000, 12_000], 'exactly the unanswered samples of each channel');
  // A fresh decoder starts 60 ms early and has settled by the first kept sample: what it gives is what was sent.
  const relativeError = (kept: Int16Array, sent: Int16Array): number => {
    let err = 0;
    let sig = 0;
    kept.forEach((v, i) => {
      err += (v - sent[i]!) ** 2;
      sig += sent[i]! ** 2;
    });
    return Math.sqrt(err / sig);
  };
  const e1 = relativeError(got[0]!, sent1.subarray(24_000));
  const e2 = relativeError(got[1]!, sent2.subarray(36_000));
  t.ok(e1 < 0.05, `channel 1: the speech after 1.5 s (relative error ${e1.toFixed(4)})`);
  t.ok(e2 < 0.05, `channel 2: the tone after 2.25 s (relative error ${e2.toFixed(4)})`);
});

t.test('two nodes: the listen node transcribes its own kept audio; processing on the jobs node waits for it', async (t) => {
  const a = new RecordingSttEngine('provider_a');
  // PostgreSQL: the nodes share the store but not a disk; the jobs node's DATA_DIR has no kept audio.
  const listenNode = await startService(t, { store: 'pg', sttEngines: [a], env: { ROLE: 'listen' } });
  const jobsNode = await startService(t, { sameDeploymentAs: listenNode, env: { ROLE: 'jobs', DATA_DIR: mkdtempSync(path.join(tmpdir(), 'jobs-node-')) } });
  const c = await open(listenNode, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  c.ws.send(second);
  const live = a.streams[0]!;
  await until(() => live.samples === 16_000, { what: 'one second decoded', timeoutMs: 10_000 });
  const conversationId = listenNode.service.sessions.sessionsOf('u1')[0]!.conversationId;
  a.autoAnswer = () => [{ text: 'Kept words.', speaker: 'SPEAKER_00', start: 0.1, end: 0.8 }];
  a.failOpen = true; // no provider usable for now: the kept audio waits
  const attempts = a.attempts;
  live.fail({ outcome: 'upstream_error', retryable: true, reason: 'connection_lost' });
  await c.closed;
  await until(() => a.attempts > attempts, { what: 'the kept-audio job tried a provider', timeoutMs: 10_000 });
  const res = await listenNode.req('/v1/conversations', { method: 'POST', headers: bearer(await listenNode.token('u1')), body: {} });
  t.equal(res.status, 200, `the user ends the conversation (${res.status} ${JSON.stringify(res.json)})`);
  const id = conversationId ?? (await listenNode.service.services.conversations.latestWithStatus('u1', 'processing'))!.id;
  await until(async () => (await listenNode.service.services.conversations.getById(id))?.status === 'processing', { what: 'processing requested', timeoutMs: 10_000 });
  a.failOpen = false;
  await until(async () => {
    await advance(listenNode, 2000);
    return (await listenNode.service.services.conversations.getById(id))?.status === 'completed';
  }, { what: 'processed once the kept audio was transcribed', timeoutMs: 20_000 });
  const segs = await listenNode.service.services.conversations.segments(id);
  t.same(segs.map((s) => s.text), ['Kept words.'], 'processing on the jobs node saw the kept words');
  t.equal(jobsNode.service.sessions.size, 0);
});
