// The one way a test waits for work another thread, process or socket does: poll a condition under a real-time
// bound that only guards against a hang. Never use it to prove that something did not happen.

export interface UntilOptions {
  /** What is awaited, for the timeout's message. */
  what?: string;
  /** Real-time bound, in milliseconds: long enough for a box loaded by the suite itself. @defaultValue 30000 */
  timeoutMs?: number;
  /** Pause between two polls, in milliseconds. @defaultValue 5 */
  everyMs?: number;
}

/** Resolves once `cond` answers true; rejects with "timed out waiting for <what>" past the bound. */
export async function until(cond: () => boolean | Promise<boolean>, opts: UntilOptions = {}): Promise<void> {
  await waitFor(async () => ((await cond()) ? true : undefined), opts);
}

/** Resolves with the first value `read` answers that is not undefined (and passes `done`, if given). */
export async function waitFor<T>(read: () => T | undefined | Promise<T | undefined>, opts: UntilOptions & { done?: (v: T) => boolean } = {}): Promise<T> {
  const { what = 'condition', timeoutMs = 30_000, everyMs = 5, done } = opts;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (v !== undefined && (done === undefined || done(v))) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
