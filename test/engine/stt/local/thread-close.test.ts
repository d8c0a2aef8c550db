// The local engine ends its speech threads only once they have loaded their module and its opens are done: a thread
// ended inside a native addon's init can abort the process. A gated session loads the VAD only for whole windows.
import t from 'tap';
import { LocalEngine } from '../../../../engine/stt/local/speech.js';
import { loadedBeforeEnd, SLOW_LOAD_HANDLER } from '../../../helpers/slow-load.js';

const opts = (sessionId: string) => ({ language: 'en', sampleRateHz: 16000 as const, sessionId });

t.test('LocalEngine.close() waits for each of its threads to load', async (t) => {
  t.ok(await loadedBeforeEnd(t, () => {
    const engine = new LocalEngine({ filename: SLOW_LOAD_HANDLER, threads: 1 });
    return () => engine.close();
  }));
});

t.test('LocalEngine.close() waits for an open under way and closes the stream it made', async (t) => {
  const engine = new LocalEngine({ gate: {} });
  const opening = engine.open(opts('o1'));
  await engine.close();
  const stream = await opening;
  t.same(engine.load, [0], 'the session opened during close() was closed by it');
  stream.write(new Int16Array(512)); // ignored: the stream is closed
  await stream.finalize();
  await t.rejects(engine.open(opts('o2')), { code: 'ENG_ERR_STT_LOCAL_FAILED', reason: 'initialization_failed' });
});

t.test('a gate without its model loads it only for a whole window, and then lets the audio through', async (t) => {
  const engine = new LocalEngine({ gate: { modelPath: '/nonexistent/model.onnx' } });
  t.teardown(() => engine.close());
  const stream = await engine.open(opts('m1'));
  const failures: unknown[] = [];
  stream.on('failure', (f) => failures.push(f));
  stream.write(new Int16Array(100));
  await stream.finalize();
  t.match(stream.gate, { inSamples: 100, passedSamples: 0, vadFailures: 0 }, 'no whole window: no VAD, no failure');
  stream.write(new Int16Array(1024));
  await stream.finalize();
  t.match(stream.gate, { inSamples: 1124, passedSamples: 1024, vadFailures: 1 }, 'the VAD failed: its windows passed ungated');
  t.same(failures, [], 'the session goes on');
});
