// Graceful shutdown's steps: one that never ends (here a speech engine whose close() hangs) holds stop() for at most
// SHUTDOWN_TIMEOUT_MS and is named in a warning; one that fails is named in stop()'s rejection (the process exits 1).
// Either way the steps after it (Redis, the store) still run.
import t from 'tap';
import { createLogger } from '../../engine/logger.js';
import type { SttEngine } from '../../engine/stt/types.js';
import { startService } from '../helpers/service.js';

t.test('a shutdown step that never ends: stop() goes on after SHUTDOWN_TIMEOUT_MS, names it, and the later steps run', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  let closeCalled = false;
  const stuck: SttEngine = {
    name: 'stuck',
    supports: () => true,
    open: () => Promise.reject(new Error('not for sessions')),
    close: () => {
      closeCalled = true;
      return new Promise<void>(() => undefined);
    },
  };
  const ts = await startService(t, { env: { SHUTDOWN_TIMEOUT_MS: '300' }, sttEngines: [stuck], logger });
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
  t.equal(ts.service.services.redis.status, 'end', 'Redis, a later step, was closed');
  await t.rejects(ts.service.services.store.knex.raw('select 1'), 'the store, a later step, was closed');
});

t.test('a shutdown step that fails: the later steps still run, then stop() rejects naming it', async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('warn', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const failing: SttEngine = {
    name: 'failing',
    supports: () => true,
    open: () => Promise.reject(new Error('not for sessions')),
    close: () => Promise.reject(new Error('the engine could not close')),
  };
  const ts = await startService(t, { sttEngines: [failing], logger, stopMayFail: true });
  await t.rejects(ts.service.stop(), { message: 'shutdown steps failed: stt' });
  t.match(lines.filter((l) => l.step === 'stt'), [{ level: 50, err: { message: 'speech engines failed to close: failing (the engine could not close)' }, msg: 'shutdown step failed' }]);
  t.equal(ts.service.services.redis.status, 'end', 'Redis, a later step, was closed');
  await t.rejects(ts.service.services.store.knex.raw('select 1'), 'the store, a later step, was closed');
});
