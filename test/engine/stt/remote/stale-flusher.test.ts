// The stale-rest flusher with real batchers on a manual clock: a streaming stream registers once and its messages go
// out whole; a pause's rest goes out within two periods and the stream then leaves, taking the timer with it.
import t, { type Test } from 'tap';
import { ManualClock } from '../../../../engine/clock.js';
import { Scheduler } from '../../../../engine/scheduler.js';
import { StaleFlusher, type StaleFlushable } from '../../../../engine/stt/remote/stale-flusher.js';
import { PcmBatcher } from '../../../../engine/stt/remote/pcm-batcher.js';

const PERIOD_MS = 100;
const MESSAGE = 1600; // 100 ms at 16 kHz
const FRAME = 330; // ~21 ms: message boundaries fall inside frames (the first frame ending on one is the 160th)

function setup(t: Test) {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  t.teardown(() => scheduler.close());
  const flusher = new StaleFlusher(scheduler, PERIOD_MS);
  const holds: StaleFlushable[] = [];
  const hold = flusher.hold.bind(flusher);
  flusher.hold = (s) => {
    holds.push(s);
    hold(s);
  };
  const step = async (ms: number) => {
    clock.advance(ms);
    await scheduler.tick();
  };
  return { scheduler, flusher, holds, step };
}

function batcher(flusher: StaleFlusher, sent: number[][], id: number): PcmBatcher {
  return new PcmBatcher({ sendSamples: MESSAGE, minSamples: 320, flusher, send: (pcm) => sent[id]!.push(pcm.length) });
}

t.test('streaming streams stay registered between messages; a paused one sends its rest and leaves', async (t) => {
  const { scheduler, flusher, holds, step } = setup(t);
  const sent: number[][] = [[], []];
  const a = batcher(flusher, sent, 0);
  const b = batcher(flusher, sent, 1);
  for (let i = 0; i < 101; i++) {
    a.write(new Int16Array(FRAME));
    b.write(new Int16Array(FRAME));
    await step(15);
  }
  t.same(sent[0], new Array(20).fill(MESSAGE), '2.1 s of audio went out as 20 whole messages, none flushed early');
  t.same(holds.length, 2, 'each stream registered once in 20 messages, with a rest waiting at every tick');
  t.equal(flusher.size, 2);

  // b pauses; a streams on.
  for (let i = 0; i < 20; i++) {
    a.write(new Int16Array(FRAME));
    await step(15);
  }
  t.same(sent[1]!.slice(20), [(101 * FRAME) % MESSAGE], 'the paused stream’s rest went out alone, within two periods');
  t.same(sent[0]!.length, 24, 'the other streamed on');
  t.equal(flusher.size, 1, 'then it left the flusher');
  t.equal(holds.length, 2, 'the streaming one still did not register again');

  a.stop();
  t.equal(flusher.size, 0);
  t.equal(scheduler.size, 0, 'no timer once no stream is registered');
  b.write(new Int16Array(160)); // 10 ms: below the 20 ms floor
  await step(PERIOD_MS);
  await step(PERIOD_MS);
  t.equal(sent[1]!.length, 21, 'a rest under the floor waits for more audio');
  t.equal(scheduler.size, 0, 'unregistered meanwhile');
  b.write(new Int16Array(MESSAGE - 160));
  t.equal(sent[1]!.at(-1), MESSAGE, 'more audio completes the message');
});
