// The progress bar every scenario prints on stderr while it runs: redrawn in place on a terminal, a line per 10% otherwise.

const WIDTH = 28;

export class Progress {
  #tty = Boolean(process.stderr.isTTY);
  #lastDraw = 0;
  #lastDecile = -1;
  #label;
  #total;
  #unit;
  #drawn = false;

  /**
   * @param {string} label what runs (phase name)
   * @param {number} total the amount that makes 100%
   * @param {string} [unit] unit of `total`, e.g. 's'
   */
  constructor(label, total, unit = '') {
    this.#label = label;
    this.#total = Math.max(total, 1e-9);
    this.#unit = unit;
  }

  /**
   * @param {number} done
   * @param {string} [extra] live figures after the bar
   */
  update(done, extra = '') {
    const frac = Math.min(1, Math.max(0, done / this.#total));
    const now = Date.now();
    if (this.#tty) {
      if (now - this.#lastDraw < 100 && frac < 1) return;
      this.#lastDraw = now;
      process.stderr.write(`\r\x1b[2K${this.#line(frac, done, extra)}`);
      this.#drawn = true;
      return;
    }
    const decile = Math.floor(frac * 10);
    if (decile === this.#lastDecile) return;
    this.#lastDecile = decile;
    process.stderr.write(`${this.#line(frac, done, extra)}\n`);
  }

  /**
   * A new phase on the same bar (ramp steps, fleet phases).
   * @param {string} label
   * @param {number} total
   */
  phase(label, total) {
    this.end();
    this.#label = label;
    this.#total = Math.max(total, 1e-9);
    this.#lastDecile = -1;
  }

  /** Leaves the bar's last state on its own line. */
  end() {
    if (this.#tty && this.#drawn) process.stderr.write('\n');
    this.#drawn = false;
  }

  /** A message above the bar. */
  log(/** @type {string} */ msg) {
    if (this.#tty && this.#drawn) process.stderr.write('\r\x1b[2K');
    process.stderr.write(`${msg}\n`);
    this.#drawn = false;
  }

  /**
   * @param {number} frac
   * @param {number} done
   * @param {string} extra
   */
  #line(frac, done, extra) {
    const full = Math.round(frac * WIDTH);
    const bar = '█'.repeat(full) + '░'.repeat(WIDTH - full);
    const amount = `${Math.round(Math.min(done, this.#total))}/${Math.round(this.#total)}${this.#unit ? ` ${this.#unit}` : ''}`;
    return `${this.#label} [${bar}] ${String(Math.round(frac * 100)).padStart(3)}% ${amount}${extra ? `  ${extra}` : ''}`;
  }
}
