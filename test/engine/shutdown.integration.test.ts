// Graceful shutdown's steps: one that never ends (here a speech engine whose close() hangs) holds stop() for at most
// SHUTDOWN_TIMEOUT_MS and is named in a warning; one that fails is named in stop()'s rejection (the process exits 1).
// Either way the steps after it (Redis, the store) still run.
import t, { type Test } from 'tap';
import { createLogger } from '../../engine/logger.js';
import type { SttEngine } from '../../engine/stt/types.js';
import { startService, type StartOptions } from '../helpers/service.js';

/** A service whose one speech engine closes with `close`, logging warnings and errors into `lines`. */
async function startWithEngine(t: Test, name: string, close: () => Promise<void>, opts: Partial<StartOptions> = {}) {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const engine: SttEngine = { name, supports: () => true, open: () => Promise.reject(new Error('not for sessions')), close };
  const ts = await startService(t, { ...opts, sttEngines: [engine], logger });
  /** The later steps ran: Redis and the store are closed. */
  const laterStepsRan = async (): Promise<void> => {
    t.equal(ts.service.services.redis.status, 'end', 'Redis, a later step, was closed');
    await t.rejects(ts.service.services.store.knex.raw('select 1'), 'the store, a later step, was closed');
  };
  return { ts, lines, laterStepsRan };
}

t.test('a shutdown step that never ends: stop() goes on after SHUTDOWN_TIMEOUT_MS, names it, and the later steps run', async (t) => {
  let closeCalled = false;
  const { ts, lines, laterStepsRan } = await startWithEngine(t, 'stuck', () => {
    closeCalled = true;
    return new Promise<void>(() => undefined);
  }, { env: { SHUTDOWN_TIMEOUT_MS: '300' } });
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    ts.service.stop().then(() => 'stopped'),
    new Promise<string>((r) => (timer = setTimeout(() => r('still stopping'), 20_000))),
  ]);
  clearTimeout(timer);
  t.equal(outcome, 'stopped', 'stop() ended although the engine never closed');
  t.ok(closeCalled, "the engine's close was asked for");
  // Only the stuck step: the codec shards, closed just before, may still be loading their threads this soon after start.
  t.match(lines.filter((l) => l.step === 'stt'), [{ level: 40, waitedMs: 300, msg: 'shutdown step did not finish in time: going on without it' }]);
  t.equal(ts.service.stopStep, '', 'no step under way once stopped');
  await laterStepsRan();
});

t.test('a shutdown step that fails: the later steps still run, then stop() rejects naming it', async (t) => {
  const { ts, lines, laterStepsRan } = await startWithEngine(t, 'failing', () => Promise.reject(new Error('the engine could not close')), { stopMayFail: true });
  await t.rejects(ts.service.stop(), { message: 'shutdown steps failed: stt' });
  t.match(lines.filter((l) => l.step === 'stt'), [{ level: 50, err: { message: 'speech engines failed to close: failing (the engine could not close)' }, msg: 'shutdown step failed' }]);
  await laterStepsRan();
});
