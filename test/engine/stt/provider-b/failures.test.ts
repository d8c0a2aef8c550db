// The provider_b engine's failures against the fake Soniox server: upgrade refusals, error frames, drops, lost audio.
import { until } from '../../../helpers/until.js';
import t from 'tap';
import { SttOpenError, type SttFailure } from '../../../../engine/stt/types.js';
import { startFakeSoniox } from '../../../fakes/soniox-server.js';
import { collect, feed, openOpts, ramp, rig } from '../../../helpers/provider-b.js';

const upstream = (reason: string): SttFailure => ({ outcome: 'upstream_error', retryable: true, reason });
const config = (reason: string): SttFailure => ({ outcome: 'config_error', retryable: false, reason });

t.test('each refusal at the upgrade maps to its reason; 429 carries Retry-After', async (t) => {
  const { fake, engine } = await rig(t);
  const cases: [number, SttFailure, number | undefined][] = [
    [401, config('provider_auth'), undefined],
    [402, config('provider_budget'), undefined],
    [429, upstream('provider_rate_limited'), 2000],
    [500, upstream('provider_5xx'), undefined],
    [503, upstream('provider_5xx'), undefined],
    [404, config('provider_invalid_request'), undefined],
  ];
  for (const [status, failure, retryAfterMs] of cases) {
    fake.script({ refuse: { status, retryAfterS: retryAfterMs === undefined ? undefined : retryAfterMs / 1000 } });
    const err = await engine.open(openOpts()).catch((e: unknown) => e);
    t.type(err, SttOpenError, `${status}`);
    t.same((err as SttOpenError).failure, failure, `${status} → ${failure.reason}`);
    t.equal((err as SttOpenError).retryAfterMs, retryAfterMs);
  }
  t.equal(fake.upgrades.length, cases.length, 'one attempt each, no retries');
});

t.test('an unreachable endpoint and a hung upgrade are initialization_failed (retryable)', async (t) => {
  const closed = await startFakeSoniox();
  const url = closed.url;
  await closed.close();
  const unreachable = await rig(t, {}, { url });
  const err = await unreachable.engine.open(openOpts()).catch((e: unknown) => e);
  t.same((err as SttOpenError).failure, upstream('initialization_failed'));

  const { fake, engine, advance } = await rig(t);
  fake.script({ hang: true });
  let settled: unknown;
  const opening = engine.open(openOpts()).catch((e: unknown) => (settled = e));
  await until(() => fake.upgrades.length === 1);
  await advance(9999);
  t.equal(settled, undefined, 'still connecting before connectTimeoutMs');
  await advance(1);
  await opening;
  t.same((settled as SttOpenError).failure, upstream('initialization_failed'));
});

t.test('each error frame mid-stream is one failure with its reason', async (t) => {
  const { fake, engine } = await rig(t);
  const cases: [number, string, string, SttFailure][] = [
    [402, 'organization_balance_exhausted', 'Organization balance exhausted.', config('provider_budget')],
    [429, 'rate_limit_exceeded', 'Too many requests.', upstream('provider_rate_limited')],
    [400, 'invalid_request', 'Invalid control message.', config('provider_invalid_request')],
    [400, 'invalid_request', 'No audio received.', upstream('soniox_idle_timeout')],
    [408, 'request_timeout', 'Request timeout.', upstream('soniox_idle_timeout')],
    [413, 'max_duration_reached', 'Maximum audio duration reached.', upstream('soniox_rotation')],
    [401, 'unauthenticated', 'Invalid API key.', config('provider_auth')],
    [500, 'internal_error', 'Internal error.', upstream('provider_5xx')],
    [503, 'service_unavailable', 'Cannot continue request (code N). Please restart the request.', upstream('provider_5xx')],
  ];
  for (const [code, type, message, failure] of cases) {
    fake.script({ error: { afterMs: 500, code, type, message } });
    const stream = await engine.open(openOpts());
    const got = collect(stream);
    feed(stream, 1000);
    await until(() => got.failures.length > 0, { what: `failure for ${code} ${message}` });
    await stream.close();
    t.same(got.failures, [failure], `${code} ${message} → ${failure.reason}`);
  }
});

t.test('a bad key is provider_auth, whether the error frame beats open() or not', async (t) => {
  const { fake, engine, logs } = await rig(t, {}, { apiKey: 'a-wrong-key-123' });
  const failure = await engine.open(openOpts()).then(
    (stream) => new Promise<SttFailure>((resolve) => stream.on('failure', resolve)),
    (err: SttOpenError) => err.failure,
  );
  t.same(failure, config('provider_auth'));
  t.same(fake.sessions[0]!.error, { code: 401, type: 'unauthenticated' });
  t.notOk(logs.join('\n').includes('a-wrong-key-123'), 'the key is never logged');
});

t.test('a mid-stream drop is one connection_lost failure and acknowledgedSamples() says where the finals ended', async (t) => {
  const { fake, engine, scheduler, advance } = await rig(t);
  fake.script({ tokens: [{ text: 'one', start_ms: 0, end_ms: 300 }, { text: ' two', start_ms: 300, end_ms: 600 }], finalLagMs: 1000, drop: { afterMs: 2500 } });
  const entriesBefore = scheduler.size;
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  let at = feed(stream, 2000);
  await until(() => stream.acknowledgedSamples!() === 16000, { what: 'the provider to acknowledge the first second' });
  const tail = ramp(600, at);
  stream.write(tail);
  at += tail.length;
  await until(() => got.failures.length > 0, { what: 'the failure' });
  t.same(got.failures, [upstream('connection_lost')]);
  t.same(got.segments.map((s) => s.text), ['one two'], 'final words held for a cut were emitted');
  t.same(got.order, ['segments', 'failure'], 'words first, then the failure');
  // The tail leaves as one message, which the provider may have answered for in part before the drop.
  const acked = stream.acknowledgedSamples!();
  t.ok(acked >= 16000 && acked < 2.5 * 16000 && acked < at, `acknowledged up to ${acked / 16000} s: where the provider's finals ended, before the drop`);
  stream.write(ramp(100, at));
  t.equal(stream.acknowledgedSamples!(), acked, 'writes after the failure change nothing');
  t.ok(fake.sessions[0]!.audioBytes >= 2.5 * 16000 * 2, 'the fake had received up to the drop');
  t.equal(scheduler.size, entriesBefore, 'no keepalive entry left after the failure');
  await advance(60000);
  await stream.finalize();
  await stream.close();
  await stream.close();
  t.equal(got.failures.length, 1, 'one failure only');
});

t.test('a slow provider still answers; until it does nothing is acknowledged', async (t) => {
  const { fake, engine } = await rig(t);
  fake.script({ tokens: [{ text: 'slow', start_ms: 0, end_ms: 400 }], finalLagMs: 60000, delayMs: 30 });
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  feed(stream, 3000);
  t.equal(stream.acknowledgedSamples!(), 0, 'no final yet');
  await stream.finalize();
  t.same(got.segments.map((s) => s.text), ['slow']);
  await stream.close();
});

t.test('audio out with no message back for 20 s fails as provider_stalled; a pause never counts', async (t) => {
  const { fake, engine, advance } = await rig(t);
  const script = { tokens: [{ text: 'one', start_ms: 0, end_ms: 300 }], finalLagMs: 1000, stall: false };
  fake.script(script);
  const stream = await engine.open(openOpts());
  const got = collect(stream);
  let at = feed(stream, 2000);
  await until(() => stream.acknowledgedSamples!() === 16000, { what: 'the provider to acknowledge the first second' });
  // A pause with a second still unanswered: nothing goes out, so nothing is owed an answer.
  for (let s = 0; s < 60; s++) await advance(1000);
  t.same(got.failures, [], 'a minute of pause is no stall');
  script.stall = true;
  let silentS = 0;
  while (got.failures.length === 0 && silentS < 40) {
    at = feed(stream, 1000, at);
    await advance(1000);
    silentS++;
  }
  t.same(got.failures, [upstream('provider_stalled')]);
  t.ok(silentS >= 20 && silentS <= 25, `noticed after ${silentS} s of audio without an answer (bound: 20-25 s)`);
  await until(() => fake.sessions[0]!.closed, { what: 'the stalled socket closed' });
  await stream.close();
});
