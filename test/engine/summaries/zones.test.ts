// Local days and hours in IANA zones from UTC−11 to UTC+14, half-hour offsets and daylight-saving change days.
import t from 'tap';
import { addDays, localDay, localTime, summaryDate } from '../../../engine/summaries/zones.js';

const at = (iso: string): number => Date.parse(iso);
const H = 3600_000;

t.test('the local hour and date of an instant', async (t) => {
  t.same(localTime(at('2026-06-15T09:00:00Z'), 'Pacific/Pago_Pago'), { date: '2026-06-14', hour: 22, minute: 0 }, 'UTC−11');
  t.same(localTime(at('2026-06-15T08:00:00Z'), 'Pacific/Kiritimati'), { date: '2026-06-15', hour: 22, minute: 0 }, 'UTC+14');
  t.same(localTime(at('2026-06-15T16:00:00Z'), 'Asia/Kolkata'), { date: '2026-06-15', hour: 21, minute: 30 }, 'UTC+5:30');
  t.same(localTime(at('2026-03-08T07:00:00Z'), 'America/New_York'), { date: '2026-03-08', hour: 3, minute: 0 }, 'clocks jumped from 02:00 to 03:00');
});

t.test('a local day: 24 hours, 23 on the spring change, 25 on the autumn one', async (t) => {
  t.same(localDay('2026-06-14', 'Pacific/Pago_Pago'), [at('2026-06-14T11:00:00Z'), at('2026-06-15T11:00:00Z')]);
  t.same(localDay('2026-06-15', 'Pacific/Kiritimati'), [at('2026-06-14T10:00:00Z'), at('2026-06-15T10:00:00Z')]);
  const spring = localDay('2026-03-08', 'America/New_York');
  t.same(spring, [at('2026-03-08T05:00:00Z'), at('2026-03-09T04:00:00Z')]);
  t.equal(spring[1] - spring[0], 23 * H);
  const autumn = localDay('2026-10-25', 'Europe/Berlin');
  t.same(autumn, [at('2026-10-24T22:00:00Z'), at('2026-10-25T23:00:00Z')]);
  t.equal(autumn[1] - autumn[0], 25 * H);
  t.same(localDay('2026-12-31', 'UTC'), [at('2026-12-31T00:00:00Z'), at('2027-01-01T00:00:00Z')]);
});

t.test('the noon rule: before 12:00 local the previous day, from 12:00 the current one', async (t) => {
  t.equal(summaryDate(at('2026-06-14T18:00:00Z'), 'Pacific/Kiritimati'), '2026-06-14', '08:00 on the 15th covers the 14th');
  t.equal(summaryDate(at('2026-06-14T21:59:00Z'), 'Pacific/Kiritimati'), '2026-06-14', '11:59');
  t.equal(summaryDate(at('2026-06-14T22:00:00Z'), 'Pacific/Kiritimati'), '2026-06-15', '12:00');
  t.equal(summaryDate(at('2026-06-15T09:00:00Z'), 'Pacific/Pago_Pago'), '2026-06-14', '22:00 covers the same day');
  t.equal(summaryDate(at('2026-01-01T05:00:00Z'), 'America/New_York'), '2025-12-31', 'across a year');
  t.equal(addDays('2028-02-28', 1), '2028-02-29');
});
