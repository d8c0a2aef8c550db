// The ring of a session's last seconds of PCM kept in its codec thread: positions, wrap-around and clamping.
import t from 'tap';
import { PcmWindow } from '../../workers/pcm-window.js';

const ramp = (from: number, n: number): Int16Array => Int16Array.from({ length: n }, (_, i) => (from + i) % 30000);

t.test('reads back stream ranges across the wrap, clamped to what the ring still holds', async (t) => {
  const w = new PcmWindow(100, 50);
  t.equal(w.start, 50);
  w.append(ramp(50, 30));
  t.same([w.start, w.end], [50, 80]);
  t.same([...w.read([60, 70])], [...ramp(60, 10)], 'a range inside');
  t.same([...w.read([0, 55])], [...ramp(50, 5)], 'samples before the window opened are not there');
  for (let at = 80; at < 417; at += 37) w.append(ramp(at, Math.min(37, 417 - at)));
  t.same([w.start, w.end], [317, 417]);
  t.same([...w.read([300, 330, 400, 500])], [...ramp(317, 13), ...ramp(400, 17)], 'two ranges, each clamped, concatenated');
  t.equal(w.read([0, 100]).length, 0, 'a range wholly out of the window adds nothing');
  w.append(ramp(417, 250));
  t.same([w.start, w.end], [567, 667], 'a batch longer than the ring keeps its end');
  t.same([...w.read([0, 1000])], [...ramp(567, 100)]);
  t.equal(w.bytes, 200);
});
