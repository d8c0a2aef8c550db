// What a listen bench drives its devices at: the real service (provider_a's fake behind it, or provider_b's with --stt
// provider_b) or the bare uWS baseline, each with its device generators and a measurement context.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from '../lib/report.mjs';
import { DeviceFleet } from './device-fleet.mjs';
import { FAKE_PROVIDER, PROVIDER_A_ENTRY, SERVICE_ENTRY, giveSpeechProfiles, signTokens, startBare, startFakeProvider, startService, startWebhookReceiver, streamsToProvider } from './stack.mjs';

/**
 * @typedef {object} TargetOptions
 * @property {import('./fixtures.mjs').Fixture & { file: string }} fixture
 * @property {number} devices device slots (the most sessions this run opens at once)
 * @property {import('../lib/procstat.mjs').ProcSampler} sampler
 * @property {import('./measure.mjs').Timeline} timeline
 * @property {import('../lib/progress.mjs').Progress} progress
 * @property {Partial<import('./device-fleet.mjs').FleetOptions>} fleet generator options (pauses, burst, keep-alives)
 * @property {number} [tokenTtlS] default 2 hours
 */

/**
 * @param {DeviceFleet} fleet
 * @param {import('../lib/procstat.mjs').ProcSampler} sampler
 * @param {string} suffix
 */
function watchGenerators(fleet, sampler, suffix) {
  const names = fleet.pids.map((pid, i) => {
    const name = `generator ${i + 1}${suffix}`;
    sampler.add(name, pid);
    return name;
  });
  return () => names.forEach((n) => sampler.remove(n));
}

/**
 * The service, and the provider fake when `stt` is provider_a (or auto and the service streams to it) or provider_b.
 * `stt`: 'auto' (provider_a when the service uses it, else custom), 'provider_a', 'provider_b', 'custom' (custom_stt=enabled:
 * no STT; devices send suggested_transcript), 'local' (the service's default engine).
 * With `webhook`, every device's user has that developer webhook pointed at a local receiver (its own process).
 * `speakerId` 'on': every device's user has a speech profile, so each session identifies its speakers; 'off': nobody
 * has one (the sessions look, find nothing to compare and keep no window).
 * @param {TargetOptions & { stt: 'auto' | 'provider_a' | 'provider_b' | 'custom' | 'local', nodeArgs?: string[], webhook?: 'realtime_transcript' | 'audio_bytes', speakerId?: 'on' | 'off', ack?: boolean }} o
 */
export async function serviceTarget(o) {
  const { fixture } = o;
  const uids = Array.from({ length: o.devices }, (_, i) => `bench-device-${i}`);
  /** @type {Awaited<ReturnType<typeof startFakeProvider>> | undefined} */
  let fake;
  let stt = o.stt;
  /** @type {string | undefined} */
  let note;
  if (stt === 'auto' && !existsSync(path.join(ROOT_DIR, FAKE_PROVIDER))) {
    note = `${FAKE_PROVIDER} is not built: sessions ran with custom_stt=enabled, so no STT stage, no provider latency and no loss count`;
    stt = 'custom';
  }
  const query = (/** @type {string} */ mode) => `codec=${fixture.codec}&sample_rate=${fixture.sampleRate}&language=en${mode === 'custom' ? '&custom_stt=enabled' : ''}${o.ack ? '&ack=enabled' : ''}`;
  /** Starts the service (and the provider's fake); with a fake, answers whether the service streams to it. */
  const start = async (/** @type {string} */ entry) => {
    // Read at each start: a build that does not stream to provider_a is started again with stt 'custom'.
    const provider = stt === 'provider_b' ? 'provider_b' : stt === 'auto' || stt === 'provider_a' ? 'provider_a' : undefined;
    /** @type {Record<string, string>} */
    let env = {};
    if (provider) {
      const key = randomBytes(12).toString('hex');
      fake = await startFakeProvider(key, provider);
      env = provider === 'provider_a'
        ? { STT_PROVIDERS: 'provider_a', PROVIDER_A_URL: `ws://127.0.0.1:${fake.port}/v1/listen`, PROVIDER_A_API_KEY: key }
        : { STT_PROVIDERS: 'provider_b', PROVIDER_B_URL: `ws://127.0.0.1:${fake.port}/transcribe-websocket`, PROVIDER_B_API_KEY: key };
    }
    if (o.webhook) env.WEBHOOK_ALLOW_PRIVATE = 'on';
    const service = await startService({ env, nodeArgs: o.nodeArgs, entry });
    const tokens = await signTokens(service.env, [...uids, 'bench-probe'], o.tokenTtlS ?? 7200);
    if (!fake) return { service, tokens, wired: false };
    o.progress.log(`service: checking that ${entry} streams to the ${provider} fake (one probe session)`);
    const wired = await streamsToProvider(service, fake.stats, { uid: 'bench-probe', token: /** @type {string} */ (tokens.at(-1)), query: query(String(provider)), frames: fixture.frames });
    if (!wired) {
      await service.stop();
      await fake.stop();
      fake = undefined;
    }
    return { service, tokens, wired };
  };
  let s = await start(SERVICE_ENTRY);
  if (stt === 'auto' || stt === 'provider_a') {
    if (!s.wired) {
      // This build's entry point does not use provider_a yet: the bench's stand-in wires the same engine.
      s = await start(PROVIDER_A_ENTRY);
      if (s.wired) note = `${SERVICE_ENTRY} did not stream to provider_a (not wired in this build): the service ran from ${path.relative(ROOT_DIR, PROVIDER_A_ENTRY)}, the same Service with engine/stt/provider-a/engine.ts as its STT engine`;
    }
    if (!s.wired) {
      if (stt === 'provider_a') throw new Error('the service opened no stream at the provider_a fake; use --stt custom');
      note = 'the service did not stream to the provider_a fake: sessions ran with custom_stt=enabled, so no STT stage, no provider latency and no loss count';
      stt = 'custom';
      s = await start(SERVICE_ENTRY);
    } else stt = 'provider_a';
    if (note) o.progress.log(`service: ${note}`);
  } else if (stt === 'provider_b' && !s.wired) {
    // start() stopped the service and the fake.
    throw new Error('the service opened no stream at the provider_b fake');
  }
  const { service, tokens } = s;
  if (o.speakerId === 'on') {
    o.progress.log(`service: giving ${uids.length} users a speech profile`);
    await giveSpeechProfiles(service.env, uids);
  }
  const receiver = o.webhook ? await startWebhookReceiver() : undefined;
  if (receiver && o.webhook) {
    o.progress.log(`service: pointing ${uids.length} users' ${o.webhook} webhook at the receiver`);
    const url = `http://127.0.0.1:${receiver.port}/hook${o.webhook === 'audio_bytes' ? ',5' : ''}`;
    let next = 0;
    const configure = async () => {
      while (next < uids.length) {
        const i = next++;
        const res = await fetch(`http://127.0.0.1:${service.port}/v1/users/developer/webhook/${o.webhook}`, { method: 'POST', headers: { authorization: `Bearer ${tokens[i]}`, 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
        if (res.status !== 200) throw new Error(`setting the ${o.webhook} webhook answered ${res.status}: ${await res.text()}`);
        await res.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: 16 }, configure));
  }
  const fleet = await DeviceFleet.start({
    host: '127.0.0.1',
    port: service.port,
    query: query(stt),
    fixtureFile: fixture.file,
    devices: uids.map((uid, i) => ({ uid, token: /** @type {string} */ (tokens[i]) })),
    suggest: stt === 'custom',
    ack: o.ack ?? false,
    ...o.fleet,
  });
  o.sampler.add('service', service.pid);
  if (fake) o.sampler.add('provider fake', fake.pid);
  if (receiver) o.sampler.add('webhook receiver', receiver.pid);
  const unwatch = watchGenerators(fleet, o.sampler, '');
  /** @type {import('./measure.mjs').Ctx} */
  const ctx = {
    fleet,
    stats: fake?.stats,
    target: 'service',
    pid: service.pid,
    timeline: o.timeline,
    progress: o.progress,
    fakePid: fake?.pid,
    engineMetrics: () => service.engineMetrics(),
    endConversations: (n) => service.endConversations(tokens.slice(0, Math.min(n, uids.length))),
  };
  return {
    ctx,
    service,
    stt,
    note,
    fakePid: fake?.pid,
    /** The webhook receiver's counts (requests, bytes, segments, users), or undefined without --webhook. */
    webhookStats: receiver
      ? async () => /** @type {{ requests: number, bytes: number, segments: number, users: number }} */ (await (await fetch(`http://127.0.0.1:${receiver.port}/stats`)).json())
      : undefined,
    async stop() {
      await fleet.exit();
      unwatch();
      o.sampler.remove('service');
      o.sampler.remove('provider fake');
      o.sampler.remove('webhook receiver');
      const code = await service.stop();
      await fake?.stop();
      await receiver?.stop();
      return code;
    },
  };
}

/**
 * The bare uWS server decoding inline (bare-listen.mjs): no auth, so the devices' tokens are placeholders. With
 * `forward`, it also sends each session's PCM to a provider_a fake of its own, as a listen node must.
 * @param {TargetOptions & { forward?: boolean }} o
 */
export async function bareTarget(o) {
  // A fake of its own, so the service's never counts the bare server's audio.
  const key = randomBytes(12).toString('hex');
  const fake = o.forward ? await startFakeProvider(key) : undefined;
  const bare = await startBare(o.fixture.codec, o.fixture.sampleRate, fake ? { url: `ws://127.0.0.1:${fake.port}/v1/listen`, key } : undefined);
  const fleet = await DeviceFleet.start({
    host: '127.0.0.1',
    port: bare.port,
    query: `codec=${o.fixture.codec}&sample_rate=${o.fixture.sampleRate}`,
    fixtureFile: o.fixture.file,
    devices: Array.from({ length: o.devices }, (_, i) => ({ uid: `bench-device-${i}`, token: 'none' })),
    ...o.fleet,
  });
  o.sampler.add('bare', bare.pid);
  if (fake) o.sampler.add('provider fake (bare run)', fake.pid);
  const unwatch = watchGenerators(fleet, o.sampler, ' (bare run)');
  /** @type {import('./measure.mjs').Ctx} */
  const ctx = { fleet, stats: bare.stats, target: 'bare', pid: bare.pid, fakePid: fake?.pid, timeline: o.timeline, progress: o.progress };
  return {
    ctx,
    async stop() {
      await fleet.exit();
      unwatch();
      o.sampler.remove('bare');
      if (fake) {
        // Forwarding that silently failed would make the baseline cheap.
        const [sent, got] = await Promise.all([bare.stats.get(), fake.stats.get()]);
        const s = /** @type {any} */ (sent);
        o.progress.log(`bare server: ${s.forwardedBytes} bytes of PCM forwarded, ${got.bytes} received by its provider fake, ${s.uplinksRefused} sockets refused`);
      }
      await bare.stop();
      if (fake) {
        o.sampler.remove('provider fake (bare run)');
        await fake.stop();
      }
    },
  };
}
