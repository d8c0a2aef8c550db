// A speech provider that stops answering but keeps its socket open: the session notices once 20 s of audio went out
// with no message back (checked at each keep-alive period: 4 s for provider_a, 5 s for provider_b), reports
// stt_failed `provider_stalled`, closes 1011, and every sample the provider had not answered for is kept and
// transcribed later by the kept-audio job.
import t from 'tap';
import type { Test } from 'tap';
import { startService, type TestService } from '../../helpers/service.js';
import { advance, open } from '../../helpers/listen.js';
import { until } from '../../helpers/until.js';
import { startFakeDeepgram, type ConnectStep } from '../../fakes/deepgram-server.js';
import { FAKE_SONIOX_KEY, startFakeSoniox, type SessionScript } from '../../fakes/soniox-server.js';

/** What the test needs of a provider's fake: its connections in order, and a switch that makes the first one stall. */
interface StallRig {
  env: Record<string, string>;
  /** Connection `i`: audio bytes received, open or not, and the audio itself. */
  conn(i: number): { bytes: number; open: boolean; audio: Buffer[] } | undefined;
  connections(): number;
  /** True once the first connection answered for its first words; the sample its answers covered by then. */
  answered(): number | undefined;
  /** From now on the first connection reads audio but answers nothing. */
  stall(): void;
}

async function deepgramRig(t: Test): Promise<StallRig> {
  const fake = await startFakeDeepgram({ recordAudio: true, sweepEveryMs: 0 });
  t.teardown(() => fake.close());
  const live: ConnectStep = { kind: 'accept', results: [{ afterS: 0.95, words: [{ word: 'before', punctuated_word: 'Before.', speaker: 0, start: 0.2, end: 0.6 }] }] };
  fake.script(live, { kind: 'accept', results: [] });
  return {
    env: { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: fake.url, PROVIDER_A_API_KEY: 'test-key' },
    conn: (i) => fake.streams[i],
    connections: () => fake.streams.length,
    answered: () => ((fake.streams[0]?.resultsSent ?? 0) >= 1 ? 0.95 * 16_000 : undefined),
    stall: () => void (live.answerDelayMs = 3_600_000),
  };
}

async function sonioxRig(t: Test): Promise<StallRig> {
  const fake = await startFakeSoniox();
  t.teardown(() => fake.close());
  const live: SessionScript = { tokens: [{ text: 'Before.', start_ms: 200, end_ms: 600 }] };
  fake.script(live, { tokens: [] });
  const conn = (i: number): { bytes: number; open: boolean; audio: Buffer[] } | undefined => {
    const s = fake.sessions[i];
    return s && { bytes: s.audioBytes, open: !s.closed, audio: s.audio };
  };
  return {
    env: { STT_PROVIDERS: 'provider_b', PROVIDER_B_URL: fake.url, PROVIDER_B_API_KEY: FAKE_SONIOX_KEY },
    conn,
    connections: () => fake.sessions.length,
    answered: () => {
      // Every audio message is answered; the first word is final once 1.6 s of audio arrived.
      const last = fake.sessions[0]?.answers.at(-1);
      const finalMs = Number(last?.final_audio_proc_ms ?? 0);
      return finalMs >= 1000 && fake.sessions[0]!.audioBytes >= 64_000 - 3200 ? Math.floor(finalMs * 16) : undefined;
    },
    stall: () => void (live.stall = true),
  };
}

const cases: { provider: string; rig: (t: Test) => Promise<StallRig>; warmUpS: number; boundS: [number, number] }[] = [
  { provider: 'provider_a', rig: deepgramRig, warmUpS: 1, boundS: [20, 24] },
  { provider: 'provider_b', rig: sonioxRig, warmUpS: 2, boundS: [20, 25] },
];

for (const { provider, rig, warmUpS, boundS } of cases) {
  t.test(`a stalled ${provider} is failed within ${boundS[1]} s of audio, and the unanswered audio is kept, every sample`, async (t) => {
    const fake = await rig(t);
    const ts: TestService = await startService(t, { env: fake.env });
    const c = await open(ts, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
    await c.ready();
    // Noise, not a tone, so a shifted tail cannot compare equal.
    const seconds = 40;
    const pcm = new Int16Array(seconds * 16_000);
    let seed = 11;
    for (let i = 0; i < pcm.length; i++) pcm[i] = ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) - 32768;
    const sendSecond = (s: number): void => {
      for (let i = s * 16_000; i < (s + 1) * 16_000; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, 3200).slice());
    };
    for (let s = 0; s < warmUpS; s++) sendSecond(s);
    let answeredTo: number | undefined;
    await until(async () => {
      await advance(ts, 100);
      return (answeredTo = fake.answered()) !== undefined;
    }, { what: 'the first final result', timeoutMs: 15_000 });
    // From here the provider reads audio but holds every answer: the socket stays open.
    fake.stall();
    let failedAtS = 0;
    const failed = c.json((m) => m.status === 'stt_failed', 120_000);
    for (let s = warmUpS; s < seconds; s++) {
      sendSecond(s);
      // Each second reaches the provider before the clock moves past it: the stall counts periods that carried audio.
      await until(() => fake.conn(0)!.bytes >= (s + 1) * 32_000 - 3200 || !fake.conn(0)!.open, { what: `second ${s} at the provider`, timeoutMs: 15_000 });
      if (!fake.conn(0)!.open) break;
      await advance(ts, 1000);
      failedAtS = s - warmUpS + 1;
    }
    t.match(await failed, { type: 'service_status', status: 'stt_failed', outcome: 'upstream_error', provider, retryable: true, reason: 'provider_stalled' });
    t.ok(failedAtS >= boundS[0] && failedAtS <= boundS[1], `noticed after ${failedAtS} s without an answer (bound: ${boundS[0]}-${boundS[1]} s)`);
    t.same(await c.closed, { code: 1011, reason: 'transcription_service_unavailable' });
    await until(() => !fake.conn(0)!.open, { what: 'the stalled socket closed', timeoutMs: 5_000 });
    const sentSamples = fake.conn(0)!.bytes / 2;
    await until(() => fake.connections() === 2 && !fake.conn(1)!.open, { what: 'the kept audio streamed by the job', timeoutMs: 30_000 });
    const kept = new Int16Array(new Uint8Array(Buffer.concat(fake.conn(1)!.audio)).buffer);
    t.ok(kept.length >= sentSamples - answeredTo!, 'every sample sent after the last answer is kept');
    t.same(kept, pcm.subarray(answeredTo!, answeredTo! + kept.length), 'the same samples, in order, from the last answer on');
    const metrics = (await ts.req('/metrics')).text;
    t.match(metrics, new RegExp(`stt_stream_failures_total\\{provider="${provider}",reason="provider_stalled"\\} 1`), 'the failure is counted by reason');
  });
}
