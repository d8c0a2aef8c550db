// Seeded fast-check runs for the malformed-input properties: the seed comes from FUZZ_SEED or is drawn and printed, so
// a failure can be replayed with FUZZ_SEED=<seed>; fast-check's own report adds the counterexample and its path.
import fc from 'fast-check';
import type { Test } from 'tap';

/** Runs `property` `numRuns` times under a seed the test prints; the assertion fails with fast-check's report. */
export async function check<T>(t: Test, name: string, property: fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
  const seed = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Date.now() ^ (Math.random() * 0x7fffffff);
  t.comment(`${name}: ${numRuns} runs, seed ${seed} (FUZZ_SEED=${seed} replays them)`);
  const out = await fc.check(property, { numRuns, seed, endOnFailure: true });
  if (out.failed) t.fail(`${name}: ${fc.defaultReportMessage(out) ?? 'failed'} (seed ${seed})`);
  else t.pass(`${name}: ${out.numRuns} cases`);
}

/** A valid message with a few bytes changed, cut short, or with junk appended: what a bad radio link makes of one. */
export function damaged(valid: readonly Uint8Array[]): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(fc.constantFrom(...valid), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { maxLength: 8 }), fc.option(fc.nat(), { nil: undefined }), fc.uint8Array({ maxLength: 64 }))
    .map(([frame, flips, cut, tail]) => {
      const out = new Uint8Array(frame);
      for (const [at, x] of flips) if (out.length > 0) out[at % out.length]! ^= x;
      const kept = cut === undefined ? out : out.subarray(0, cut % (out.length + 1));
      const joined = new Uint8Array(kept.length + tail.length);
      joined.set(kept);
      joined.set(tail, kept.length);
      return joined;
    });
}
