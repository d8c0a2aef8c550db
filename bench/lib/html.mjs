// The self-contained HTML report of a run: machine, baseline, summary table, goals, and SVG charts (no script, no external file).
import { calibrationText } from './calibrate.mjs';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const W = 760;
const H = 270;
const M = { left: 62, right: 16, top: 14, bottom: 40 };

/**
 * @typedef {object} LineChart
 * @property {string} title
 * @property {string} yLabel
 * @property {string} [xLabel] default 'seconds'
 * @property {[number, number]} [xDomain] default: the data's range (runs pass [0, run length] so charts line up)
 * @property {{ name: string, points: [number, number][], dashed?: boolean }[]} lines `dashed`: a baseline's line
 */
/**
 * @typedef {object} BarChart
 * @property {'bar'} kind
 * @property {string} title
 * @property {string} yLabel
 * @property {string[]} categories one group of bars each
 * @property {{ name: string, values: (number | null)[] }[]} series one bar per category each
 */

/** @param {unknown} s */
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&${{ '&': 'amp', '<': 'lt', '>': 'gt', '"': 'quot' }[c]};`);

/** About five round tick values from 0 to at least `max`. */
function ticks(/** @type {number} */ max) {
  if (!(max > 0)) return [0, 1];
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const out = [];
  for (let v = 0; v <= max + step * 0.999; v += step) out.push(Math.round(v * 1e6) / 1e6);
  return out;
}

const fmt = (/** @type {number} */ v) => (Math.abs(v) >= 1000 ? `${Math.round(v / 100) / 10}k` : String(Math.round(v * 100) / 100));

/**
 * Axes, grid and labels of a chart with y from 0 to the last tick.
 * @param {number[]} yt
 * @param {string} yLabel
 */
function frame(yt, yLabel) {
  const ymax = yt[yt.length - 1] || 1;
  const y = (/** @type {number} */ v) => M.top + (H - M.top - M.bottom) * (1 - v / ymax);
  const grid = yt.map((v) => `<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" class="g"/><text x="${M.left - 6}" y="${y(v) + 4}" text-anchor="end">${fmt(v)}</text>`).join('');
  const label = `<text transform="translate(14 ${(H - M.bottom + M.top) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`;
  return { y, svg: grid + label };
}

/** @param {{ name: string, dashed?: boolean }[]} items */
function legend(items) {
  return `<div class="legend">${items.map((s, i) => `<span><i style="background:${COLORS[i % COLORS.length]}"></i>${esc(s.name)}${/** @type {any} */ (s).dashed ? ' (dashed)' : ''}</span>`).join('')}</div>`;
}

/** @param {LineChart} c */
export function lineChart(c) {
  const lines = c.lines.filter((l) => l.points.some(([, v]) => Number.isFinite(v)));
  const all = lines.flatMap((l) => l.points).filter(([x, v]) => Number.isFinite(x) && Number.isFinite(v));
  if (all.length === 0) return `<h3>${esc(c.title)}</h3><p class="empty">no data</p>`;
  const xmin = c.xDomain?.[0] ?? Math.min(...all.map(([x]) => x));
  const xmax = Math.max(c.xDomain?.[1] ?? -Infinity, ...all.map(([x]) => x), xmin + 1e-9);
  const yt = ticks(Math.max(...all.map(([, v]) => v)));
  const f = frame(yt, c.yLabel);
  const x = (/** @type {number} */ v) => M.left + ((W - M.left - M.right) * (v - xmin)) / (xmax - xmin || 1);
  const xt = ticks(xmax - xmin).map((v) => v + xmin);
  const xAxis = xt.filter((v) => v <= xmax + 1e-9).map((v) => `<text x="${x(v)}" y="${H - M.bottom + 16}" text-anchor="middle">${fmt(v)}</text>`).join('');
  const paths = lines
    .map((l, i) => {
      const pts = l.points.filter(([px, v]) => Number.isFinite(px) && Number.isFinite(v)).map(([px, v]) => `${x(px).toFixed(1)},${f.y(v).toFixed(1)}`);
      const color = COLORS[i % COLORS.length];
      const dash = l.dashed ? ' stroke-dasharray="5 3"' : '';
      return pts.length === 1 ? `<circle cx="${pts[0]?.split(',')[0]}" cy="${pts[0]?.split(',')[1]}" r="3" fill="${color}"/>` : `<polyline fill="none" stroke="${color}" stroke-width="1.6"${dash} points="${pts.join(' ')}"/>`;
    })
    .join('');
  const xLabel = `<text x="${(W + M.left) / 2}" y="${H - 6}" text-anchor="middle">${esc(c.xLabel ?? 'seconds')}</text>`;
  return `<h3>${esc(c.title)}</h3><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img">${f.svg}${xAxis}${xLabel}${paths}</svg>${legend(lines)}`;
}

/** @param {BarChart} c */
export function barChart(c) {
  const vals = c.series.flatMap((s) => s.values).filter((v) => typeof v === 'number' && Number.isFinite(v));
  if (vals.length === 0) return `<h3>${esc(c.title)}</h3><p class="empty">no data</p>`;
  const yt = ticks(Math.max(...(/** @type {number[]} */ (vals))));
  const f = frame(yt, c.yLabel);
  const groupW = (W - M.left - M.right) / c.categories.length;
  const barW = (groupW * 0.8) / c.series.length;
  let bars = '';
  c.categories.forEach((cat, ci) => {
    const gx = M.left + ci * groupW + groupW * 0.1;
    c.series.forEach((s, si) => {
      const v = s.values[ci];
      if (typeof v !== 'number' || !Number.isFinite(v)) return;
      bars += `<rect x="${(gx + si * barW).toFixed(1)}" y="${f.y(v).toFixed(1)}" width="${Math.max(1, barW - 2).toFixed(1)}" height="${(H - M.bottom - f.y(v)).toFixed(1)}" fill="${COLORS[si % COLORS.length]}"><title>${esc(`${cat} ${s.name}: ${v}`)}</title></rect>`;
    });
    bars += `<text x="${gx + groupW * 0.4}" y="${H - M.bottom + 16}" text-anchor="middle">${esc(cat)}</text>`;
  });
  return `<h3>${esc(c.title)}</h3><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img">${f.svg}${bars}</svg>${legend(c.series)}`;
}

/**
 * @param {string[]} head
 * @param {string[][]} rows
 */
function htmlTable(head, rows) {
  return `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((v) => `<td>${esc(v)}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
}

/**
 * The whole page for a result (see lib/report.mjs for its shape).
 * @param {any} r
 */
export function renderHtml(r) {
  const m = r.machine ?? {};
  const goals = (r.goals ?? []).map((/** @type {any} */ g) => [g.name, g.target, g.value === null || g.value === undefined ? 'n/a' : String(g.value), g.met === null ? 'n/a' : g.met ? 'met' : 'NOT met']);
  const charts = (r.charts ?? []).map((/** @type {any} */ c) => (c.kind === 'bar' ? barChart(c) : lineChart(c))).join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>bench ${esc(r.scenario)} ${esc(r.startedAt)}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:${W + 40}px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}h3{font-size:14px;margin:22px 0 4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
svg{font:11px system-ui,sans-serif;fill:#444;background:#fafafa}.g{stroke:#ddd}
.legend span{margin-right:14px;white-space:nowrap}.legend i{display:inline-block;width:12px;height:3px;margin:0 5px 3px 0}
.met{color:#2a7}.not{color:#c22}.empty{color:#888}pre{background:#f4f4f4;padding:8px;overflow:auto;font-size:12px}
</style></head><body>
<h1>bench: ${esc(r.scenario)}</h1>
<p>${esc(r.startedAt)} · ${esc(m.cpus)}× ${esc(m.cpuModel)}, ${esc(m.memoryGiB)} GiB, node ${esc(m.node)}, ${esc(m.os)}, load ${esc((m.loadavg ?? []).join(' '))}${m.calibration ? `, ${esc(calibrationText(m.calibration))}` : ''}${typeof m.stealPercent === 'number' ? `, CPU stolen by the hypervisor during the run ${esc(m.stealPercent)}%` : ''}</p>
<p><b>baseline:</b> ${esc(r.baseline ?? 'none')}</p>
${r.summary ? `<h2>Summary</h2>${htmlTable(r.summary.head, r.summary.rows)}` : ''}
${(r.tables ?? []).map((/** @type {any} */ t) => `<h2>${esc(t.title)}</h2>${htmlTable(t.head, t.rows)}`).join('')}
${goals.length ? `<h2>Goals</h2>${htmlTable(['goal', 'target', 'value', ''], goals).replace(/<td>met<\/td>/g, '<td class="met">met</td>').replace(/<td>NOT met<\/td>/g, '<td class="not">NOT met</td>')}` : ''}
${(r.notes ?? []).length ? `<h2>Notes</h2><ul>${r.notes.map((/** @type {string} */ n) => `<li>${esc(n)}</li>`).join('')}</ul>` : ''}
${charts ? `<h2>Charts</h2>${charts}` : ''}
<h2>Options</h2><pre>${esc(JSON.stringify(r.options ?? {}, null, 2))}</pre>
<details><summary>Full result (JSON)</summary><pre>${esc(JSON.stringify({ ...r, charts: undefined }, null, 2))}</pre></details>
</body></html>
`;
}
