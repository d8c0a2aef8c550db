// Local calendar arithmetic in IANA time zones with Intl only: the local hour and date of an instant, and the UTC
// instants a local day starts and ends at (23 or 25 hours long on a daylight-saving change day).

const formats = new Map<string, Intl.DateTimeFormat>();

function format(zone: string): Intl.DateTimeFormat {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
    formats.set(zone, f);
  }
  return f;
}

export interface LocalTime {
  /** YYYY-MM-DD */
  date: string;
  hour: number;
  minute: number;
}

function fields(ms: number, zone: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of format(zone).formatToParts(new Date(ms))) if (p.type !== 'literal') out[p.type] = Number(p.value);
  return out;
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

export function localTime(ms: number, zone: string): LocalTime {
  const f = fields(ms, zone);
  return { date: `${pad(f.year!, 4)}-${pad(f.month!)}-${pad(f.day!)}`, hour: f.hour!, minute: f.minute! };
}

/** The zone's offset from UTC at `ms`, in milliseconds (positive east of Greenwich). */
function offsetMs(ms: number, zone: string): number {
  const f = fields(ms, zone);
  return Date.UTC(f.year!, f.month! - 1, f.day!, f.hour!, f.minute!, f.second!) - Math.floor(ms / 1000) * 1000;
}

/** The UTC instant of local midnight starting `date` in `zone`. */
export function localMidnight(date: string, zone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  const naive = Date.UTC(y, m - 1, d);
  const first = naive - offsetMs(naive, zone);
  return naive - offsetMs(first, zone);
}

/** The calendar day after (or, with -1, before) `date`. */
export function addDays(date: string, n: number): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

/** [start, end) of local `date` in `zone`, as UTC milliseconds. */
export function localDay(date: string, zone: string): [number, number] {
  return [localMidnight(date, zone), localMidnight(addDays(date, 1), zone)];
}

/** The day a summary made at `ms` covers: the previous local day before 12:00 local, else the current one. */
export function summaryDate(ms: number, zone: string): string {
  const t = localTime(ms, zone);
  return t.hour < 12 ? addDays(t.date, -1) : t.date;
}
