// An in-process LRU of values computed from one user's data at one data version (engine/cache/data-versions.ts), bounded by size.
// A value is only returned for the version it was computed under; a newer version simply misses and replaces it.

interface Entry<V> {
  version: string;
  value: V;
  size: number;
}

export class VersionedCache<V> {
  /** Map order is recency order: a hit moves its entry to the end, eviction takes from the front. */
  readonly #entries = new Map<string, Entry<V>>();
  readonly #maxSize: number;
  #size = 0;

  /** @param maxSize - the largest total of the sizes given to `set` (bytes, or 1 per entry) */
  constructor(maxSize: number) {
    this.#maxSize = maxSize;
  }

  /** Total size held. */
  get size(): number {
    return this.#size;
  }

  get(key: string, version: string): V | undefined {
    const e = this.#entries.get(key);
    if (e === undefined || e.version !== version) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, e);
    return e.value;
  }

  /** Stores `value` as computed at `version`; a value larger than the whole cache is not kept. */
  set(key: string, version: string, value: V, size = 1): void {
    this.delete(key);
    if (size > this.#maxSize) return;
    while (this.#size + size > this.#maxSize) {
      const oldest = this.#entries.keys().next().value as string;
      this.delete(oldest);
    }
    this.#entries.set(key, { version, value, size });
    this.#size += size;
  }

  delete(key: string): void {
    const e = this.#entries.get(key);
    if (e === undefined) return;
    this.#entries.delete(key);
    this.#size -= e.size;
  }

  clear(): void {
    this.#entries.clear();
    this.#size = 0;
  }
}
