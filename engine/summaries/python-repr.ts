// The legacy `summary` string of the day_summary webhook: a value rendered exactly as Python's str() renders the
// same dict (single-quoted strings, True/False/None, Python's escapes), because receivers written for the compatible
// system parse it with ast.literal_eval.

/** A number Python holds as a float, rendered with a decimal point even when whole (48.0). */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type PyValue = string | number | boolean | null | undefined | PyFloat | readonly PyValue[] | { readonly [k: string]: PyValue };

// str.isprintable() is false for the categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than the ASCII space.
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/u;

function escapeChar(ch: string): string {
  const cp = ch.codePointAt(0)!;
  if (cp < 0x100) return `\\x${cp.toString(16).padStart(2, '0')}`;
  if (cp < 0x10000) return `\\u${cp.toString(16).padStart(4, '0')}`;
  return `\\U${cp.toString(16).padStart(8, '0')}`;
}

/** repr() of a str: single quotes unless the text holds a single quote and no double quote. */
export function pyStr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  // Iterating by code point keeps astral characters whole; a lone surrogate comes out as its own \udxxx escape.
  for (const ch of s) {
    if (ch === quote || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (NON_PRINTABLE.test(ch)) out += escapeChar(ch);
    else out += ch;
  }
  return out + quote;
}

/** repr() of a float: the shortest round-trip digits, positional for exponents from -4 to 15, else 1e+16 style. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mantissa, expText] = Math.abs(x).toExponential().split('e') as [string, string];
  const exp = Number(expText);
  const digits = mantissa.replace('.', '');
  const sign = x < 0 ? '-' : '';
  if (exp < -4 || exp >= 16) return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
  const frac = digits.slice(exp + 1);
  return `${sign}${whole}.${frac === '' ? '0' : frac}`;
}

/** str() of a dict, list or scalar; a JS number is a Python int when whole, else a float (wrap in PyFloat to force one). */
export function pyRepr(v: PyValue): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'string') return pyStr(v);
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pyFloat(v);
  if (v instanceof PyFloat) return pyFloat(v.value);
  if (Array.isArray(v)) return `[${(v as readonly PyValue[]).map(pyRepr).join(', ')}]`;
  return `{${Object.entries(v).map(([k, x]) => `${pyStr(k)}: ${pyRepr(x)}`).join(', ')}}`;
}
