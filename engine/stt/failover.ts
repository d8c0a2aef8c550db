// Opening a session's speech streams: eligible engines in order, up to 3 attempts each with the compatible system's
// backoff with jitter, a refused provider handing over to the next, everything abandoned once the client has left.
import type { Scheduler } from '../scheduler.js';
import { Outcome } from '../protocol.js';
import { SttOpenError, type SttEngine, type SttFailure, type SttStream, type SttStreamOptions } from './types.js';

export interface OpenStreamsOptions {
  /** Eligible engines, preferred first. */
  engines: readonly SttEngine[];
  /** One stream per channel, all on the same engine. */
  channels: number;
  stream: SttStreamOptions;
  scheduler: Scheduler;
  /** Aborted when the client leaves: no further attempt is made and pending backoff ends at once. */
  signal: AbortSignal;
  /** Attempts per engine before handing over to the next. @defaultValue 3 */
  attempts?: number;
  /** Jitter source in [0, 1). @defaultValue Math.random */
  random?: () => number;
  /** Called after each failed attempt (logs and metrics; never given provider text). */
  onAttemptFailed?: (engine: string, attempt: number, failure: SttFailure) => void;
}

export type OpenStreamsResult =
  | { ok: true; engine: SttEngine; streams: SttStream[]; fallbackFrom: string | undefined }
  | { ok: false; cancelled: true }
  | { ok: false; cancelled: false; provider: string; failure: SttFailure };

/** Delay before retry `n` (1-based): min(2^(n-1)·1000 + jitter·1000, 32000) ms, or the provider's Retry-After when longer. */
export function backoffMs(n: number, random: () => number, retryAfterMs?: number): number {
  const base = Math.min(2 ** (n - 1) * 1000 + random() * 1000, 32_000);
  return retryAfterMs === undefined ? base : Math.min(Math.max(base, retryAfterMs), 32_000);
}

/** The SttFailure an engine's open() rejection carries, whatever engine threw it. */
export function failureOf(err: unknown): SttFailure {
  if (err instanceof SttOpenError) return err.failure;
  const reason = (err as { reason?: unknown } | null)?.reason;
  if (reason === 'language_unsupported') return { outcome: Outcome.CONFIG_ERROR, retryable: false, reason };
  return { outcome: Outcome.UPSTREAM_ERROR, retryable: true, reason: typeof reason === 'string' ? reason : 'initialization_failed' };
}

function wait(scheduler: Scheduler, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = (): void => {
      scheduler.cancel(id);
      resolve();
    };
    const id = scheduler.after(ms, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

async function openAll(engine: SttEngine, o: OpenStreamsOptions): Promise<SttStream[]> {
  const streams: SttStream[] = [];
  try {
    for (let ch = 0; ch < o.channels; ch++) streams.push(await engine.open({ ...o.stream, channel: ch }));
    return streams;
  } catch (err) {
    for (const s of streams) void s.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Opens the streams: each engine gets up to `attempts` tries; a non-retryable failure (bad key, no budget) moves on at
 * once. Streams opened after the client left are closed again. When every engine failed, the first engine's failure
 * is reported (the provider the session was meant to use).
 */
export async function openStreams(o: OpenStreamsOptions): Promise<OpenStreamsResult> {
  const random = o.random ?? Math.random;
  const attempts = o.attempts ?? 3;
  let first: { provider: string; failure: SttFailure } | undefined;
  for (const engine of o.engines) {
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (o.signal.aborted) return { ok: false, cancelled: true };
      let failure: SttFailure;
      let retryAfterMs: number | undefined;
      try {
        const streams = await openAll(engine, o);
        if (o.signal.aborted) {
          for (const s of streams) void s.close().catch(() => undefined);
          return { ok: false, cancelled: true };
        }
        const fallbackFrom = engine === o.engines[0] ? undefined : o.engines[0]!.name;
        return { ok: true, engine, streams, fallbackFrom };
      } catch (err) {
        failure = failureOf(err);
        retryAfterMs = err instanceof SttOpenError ? err.retryAfterMs : undefined;
      }
      first ??= { provider: engine.name, failure };
      o.onAttemptFailed?.(engine.name, attempt, failure);
      if (!failure.retryable || attempt === attempts) break;
      await wait(o.scheduler, backoffMs(attempt, random, retryAfterMs), o.signal);
    }
  }
  if (o.signal.aborted) return { ok: false, cancelled: true };
  return { ok: false, cancelled: false, ...(first ?? { provider: 'none', failure: { outcome: Outcome.CONFIG_ERROR, retryable: false, reason: 'no_provider' } }) };
}
