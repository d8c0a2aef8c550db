// A fixed number of slots shared by callers: one takes a slot, waits in line when none is free, and gives it back.

export class Slots {
  readonly #size: number;
  #taken = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    if (!(size >= 1)) throw new RangeError('at least one slot');
    this.#size = size;
  }

  /** Slots taken now, and callers waiting for one. */
  get load(): { taken: number; waiting: number } {
    return { taken: this.#taken, waiting: this.#waiting.length };
  }

  /** Takes a slot if one is free now (nobody waits then): true when it did. */
  tryTake(): boolean {
    if (this.#taken >= this.#size) return false;
    this.#taken++;
    return true;
  }

  /** Resolves once a slot is this caller's. */
  async take(): Promise<void> {
    if (this.tryTake()) return;
    // The slot passes straight from the caller giving it back to this one: the count stays as it is.
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  give(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#taken--;
  }
}
