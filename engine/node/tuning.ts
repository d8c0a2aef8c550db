// Overrides of the live path's tuning constants (ServiceOptions.tuning): a seam for tests, never read from the environment.

/**
 * The live path's tuning, each a constant next to the code it tunes; a test may override one to exercise it.
 * Each field's default and reason is documented at its constant.
 */
export interface Tuning {
  /** Least time between two decode tasks of one codec shard, in ms. */
  readonly codecBatchMs?: number;
  /** Least time between two polls of the main thread's sockets under streaming load, in ms; 0 never paces. */
  readonly loopPaceMs?: number;
  /** New sessions decode on the main thread while it was busy less than this percent of the last second; 0 never. */
  readonly inlineBusyPct?: number;
  /** Seconds between two malloc_trim runs; 0 never. */
  readonly mallocTrimIntervalS?: number;
  /** Seconds between two JS heap compactions; 0 never. */
  readonly heapCompactIntervalS?: number;
  /** Audio per message to remote speech providers, in ms. */
  readonly sttSendMs?: number;
  /** Whole-request timeout of a durable webhook attempt, in ms. */
  readonly webhookTimeoutMs?: number;
  /** How often the webhook worker looks for deliveries whose process died, in ms. */
  readonly webhookStalledIntervalMs?: number;
  /** How often the processing worker looks for jobs whose process died (and how long a job's lock lasts), in ms. */
  readonly processingStalledIntervalMs?: number;
}
