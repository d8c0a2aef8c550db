// A provider that keeps its socket open but answers nothing: both providers' streams fail it as `provider_stalled`.

/** Periods of `periodMs` that make up `stallTimeoutMs` (at least one). */
export function stallPeriods(stallTimeoutMs: number, periodMs: number): number {
  return Math.max(1, Math.ceil(stallTimeoutMs / periodMs));
}

/**
 * Counts a stream's check periods in a row that carried audio, left some of it unanswered and heard nothing back.
 * Only periods with audio count, so a pause (nothing to answer for) never looks like a stall; any message resets it.
 */
export class StallWatch {
  readonly #periods: number;
  #heard = false;
  #sent = false;
  #silent = 0;

  constructor(periods: number) {
    this.#periods = periods;
  }

  /** Audio went out. */
  sent(): void {
    this.#sent = true;
  }

  /** A message came back. */
  heard(): void {
    this.#heard = true;
  }

  /** At each period's end: true once enough periods in a row were silent while audio went out unanswered. */
  stalled(unanswered: boolean): boolean {
    if (this.#heard) this.#silent = 0;
    else if (this.#sent && unanswered) this.#silent++;
    this.#heard = false;
    this.#sent = false;
    return this.#silent >= this.#periods;
  }
}
