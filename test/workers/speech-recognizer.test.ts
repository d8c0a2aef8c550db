// Where the local recogniser ends its utterances: at a pause once long enough, else at the quietest moment before the
// length bound; a stand-in decoder answers one word spanning each utterance, so the cuts show as segment times.
import t from 'tap';
import { PsRecognizer } from '../../workers/speech-recognizer.js';
import type { LocalSegment } from '../../workers/speech-messages.js';
import type { PsDecoder } from '../../native/pocketsphinx.js';

const RATE = 16000;

function decoder(): PsDecoder & { processed: number } {
  let frames = 0;
  return {
    processed: 0,
    process(pcm) {
      this.processed += pcm.length;
      frames += pcm.length / 160;
      return true;
    },
    endUtterance() {
      const n = Math.floor(frames);
      frames = 0;
      return n === 0 ? null : { text: 'x', words: [['x', 0, n - 1]] };
    },
    free() {},
  };
}

/** Loud "speech" (a 200 Hz square wave) with the given quiet stretches [fromS, toS) set to zero. */
function speech(seconds: number, quiet: [number, number][] = []): Int16Array {
  const out = new Int16Array(Math.round(seconds * RATE));
  for (let i = 0; i < out.length; i++) out[i] = Math.floor(i / 40) % 2 === 0 ? 3000 : -3000;
  for (const [a, b] of quiet) out.fill(0, Math.round(a * RATE), Math.round(b * RATE));
  return out;
}

function feed(r: PsRecognizer, pcm: Int16Array, chunkMs = 100): LocalSegment[] {
  const out: LocalSegment[] = [];
  const n = (RATE * chunkMs) / 1000;
  for (let at = 0; at < pcm.length; at += n) r.write(pcm.subarray(at, at + n), out);
  return out;
}

t.test('past 3 s, a 200 ms pause ends the utterance; a shorter one before does not', async (t) => {
  const d = decoder();
  const r = new PsRecognizer('', 8 * RATE, d);
  const out = feed(r, speech(8, [[1.5, 1.8], [4.5, 4.8]]));
  t.equal(out.length, 1, 'one utterance ended before the audio did');
  t.equal(out[0]!.start, 0);
  t.ok(out[0]!.end >= 4.6 && out[0]!.end <= 4.75, `cut inside the pause after 3 s (${out[0]!.end} s)`);
  r.finalize(out);
  t.equal(out.length, 2);
  t.equal(out[1]!.start, out[0]!.end, 'the next utterance starts where the cut was');
  t.equal(out[1]!.end, 8, 'finalize() ends the rest');
  t.equal(d.processed, 8 * RATE, 'every sample decoded once');
});

t.test('no pause: the cut falls at the quietest moment of the last 1.5 s before the bound', async (t) => {
  const d = decoder();
  const r = new PsRecognizer('', 8 * RATE, d);
  // 100 ms dips: too short to be pauses; the one at 6.9 s lies where the cut is chosen, the one at 3.5 s before it.
  const out = feed(r, speech(12, [[3.5, 3.6], [6.9, 7.0]]), 60);
  t.equal(out.length, 1);
  t.ok(out[0]!.end > 6.9 && out[0]!.end <= 7.0, `cut inside the dip (${out[0]!.end} s), not at the 8 s bound`);
  r.finalize(out);
  t.equal(out[1]!.start, out[0]!.end);
  t.equal(out[1]!.end, 12);
  t.equal(d.processed, 12 * RATE, 'every sample decoded once');
});

t.test('even speech with no quiet moment is cut at the bound at the latest', async (t) => {
  const d = decoder();
  const r = new PsRecognizer('', 4 * RATE, d);
  const out = feed(r, speech(10), 333);
  t.ok(out.length >= 2, `${out.length} utterances in 10 s with a 4 s bound`);
  for (const s of out) t.ok(s.end - s.start <= 4, `no utterance longer than the bound (${s.start}–${s.end})`);
  for (let i = 1; i < out.length; i++) t.equal(out[i]!.start, out[i - 1]!.end, 'utterances follow each other');
  r.finalize(out);
  t.equal(out[out.length - 1]!.end, 10);
  t.equal(d.processed, 10 * RATE);
});
