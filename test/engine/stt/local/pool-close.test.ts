// The speech pools end their threads only once those have loaded their modules (engine/runtime/task-thread.ts destroyLoaded):
// a thread ended inside a native addon's init can abort the process.
import t from 'tap';
import { LocalEngine } from '../../../../engine/stt/local/recognizer.js';
import { newVadState, VadPool } from '../../../../engine/stt/local/vad-gate.js';
import { loadedBeforeEnd, SLOW_LOAD_HANDLER } from '../../../helpers/slow-load.js';

t.test('VadPool.close() waits for its thread to load', async (t) => {
  t.ok(await loadedBeforeEnd(t, () => {
    const pool = new VadPool({ filename: SLOW_LOAD_HANDLER });
    return () => pool.close();
  }));
});

t.test('LocalEngine.close() waits for each of its threads to load', async (t) => {
  t.ok(await loadedBeforeEnd(t, () => {
    const engine = new LocalEngine({ filename: SLOW_LOAD_HANDLER, threads: 1 });
    return () => engine.close();
  }));
});

t.test('the VAD thread answers a task with no whole window without its model', async (t) => {
  const pool = new VadPool({ modelPath: '/nonexistent/model.onnx' });
  t.teardown(() => pool.close());
  const state = newVadState();
  t.equal((await pool.probabilities(new Int16Array(100), state)).length, 0, 'no probabilities, no failure');
  await t.rejects(pool.probabilities(new Int16Array(512), state), /./, 'a whole window needs the model');
});
