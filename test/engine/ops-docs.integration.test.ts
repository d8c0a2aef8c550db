// The Grafana dashboard and the Prometheus alert rules in docs/ against the real /metrics: every metric their PromQL
// reads is one the service exposes (with the type the query needs), after a live session through a provider fake and
// a push job through the FCM fake made the lazy series appear; each alert has a severity and a summary.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { parse as parseYaml } from 'yaml';
import { startService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';
import { until } from '../helpers/until.js';
import { advance, open } from '../helpers/listen.js';
import { sine } from '../helpers/codec-fixtures.js';
import { FAKE_SONIOX_KEY, startFakeSoniox } from '../fakes/soniox-server.js';
import { startFakeFcm, writeServiceAccount } from '../fakes/fcm-server.js';
import { createApp, install } from '../helpers/notifications.js';

const docs = (name: string): string => readFileSync(new URL(`../../../docs/${name}`, import.meta.url), 'utf8');

/** Words of PromQL that are not metric names. */
const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'inf', 'nan']);

/**
 * The metric names a PromQL expression reads: strings, label matchers, range and subquery windows and grouping
 * label lists are cut out; what is left that is not a function call, a keyword or part of a number is a metric name.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.$])[A-Za-z_:][\w:]*/g)) {
    const call = /^\s*\(/.test(bare.slice(m.index + m[0].length));
    if (!call && !KEYWORDS.has(m[0].toLowerCase())) names.add(m[0]);
  }
  return [...names];
}

/** Metric families of an exposition by their TYPE line, and the names of the samples it carries. */
function exposition(text: string): { types: Map<string, string>; samples: Set<string> } {
  const types = new Map<string, string>();
  const samples = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    else if (line && !line.startsWith('#')) samples.add(/^[^{ ]+/.exec(line)![0]);
  }
  return { types, samples };
}

/** Why `name` is not served by the exposition, or undefined when it is: a histogram's series read by their suffix. */
function missing(name: string, types: Map<string, string>): string | undefined {
  const suffix = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (suffix && (types.get(suffix[1]!) === 'histogram' || (suffix[2] !== 'bucket' && types.get(suffix[1]!) === 'summary'))) return undefined;
  const type = types.get(name);
  if (type === undefined) return 'not exposed';
  if (type === 'histogram') return 'a histogram: read its _bucket, _sum or _count';
  return undefined;
}

interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: { expr: string }[];
}

interface Rule {
  alert?: string;
  expr?: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

t.test('metricNames reads the names out of the PromQL the files use', async (t) => {
  t.same(metricNames('histogram_quantile(0.99, sum by (le, shard) (rate(listen_decode_delay_seconds_bucket{job=~"$job"}[$__rate_interval])))'), ['listen_decode_delay_seconds_bucket']);
  t.same(metricNames('listen_sessions{a="b"} * on(instance) group_left(node, role) service_info'), ['listen_sessions', 'service_info']);
  t.same(metricNames('a > 1.5 * (a offset 6h) and on (instance) b <= 1.1 * (b offset 6h) + 1e3').sort(), ['a', 'b']);
  t.same(metricNames('sum(rate(x_total{o=~"retry|refused"}[15m])) / sum(rate(x_total[15m])) > 0.2'), ['x_total']);
});

t.test('the dashboard and the alert rules read only metrics the service exposes', async (t) => {
  const dashboard = JSON.parse(docs('grafana-dashboard.json')) as { schemaVersion: number; templating: { list: { type: string; name: string; query: unknown }[] }; panels: Panel[] };
  t.ok(dashboard.schemaVersion >= 36, 'a current dashboard schema');
  t.match(dashboard.templating.list, [{ type: 'datasource', name: 'datasource', query: 'prometheus' }], 'a Prometheus data source variable');
  const rows = dashboard.panels.filter((p) => p.type === 'row').map((p) => p.title.toLowerCase());
  for (const want of ['live', 'decode', 'provider', 'jobs', 'webhooks', 'push', 'store', 'process']) t.ok(rows.some((r) => r.includes(want)), `a row for ${want}`);
  const queries = dashboard.panels.filter((p) => p.type !== 'row');
  for (const p of queries) {
    t.equal(p.datasource?.uid, '${datasource}', `"${p.title}" reads the chosen data source`);
    t.ok((p.targets ?? []).length > 0, `"${p.title}" has a query`);
  }

  const alerts = parseYaml(docs('prometheus-alerts.yml')) as { groups: { name: string; rules: Rule[] }[] };
  const rules = alerts.groups.flatMap((g) => g.rules);
  t.ok(rules.length >= 10, `${rules.length} alert rules`);
  for (const r of rules) {
    t.ok(r.alert && r.expr, `${r.alert ?? 'a rule'}: a name and an expression`);
    t.match(r.for, /^\d+[smh]$/, `${r.alert}: a duration`);
    t.ok(['critical', 'warning', 'info'].includes(r.labels?.severity ?? ''), `${r.alert}: a severity`);
    t.ok((r.annotations?.summary ?? '').length > 0, `${r.alert}: a summary`);
  }

  const used = new Map<string, string>();
  for (const p of queries) for (const q of p.targets ?? []) for (const n of metricNames(q.expr)) used.set(n, `dashboard panel "${p.title}"`);
  for (const r of rules) for (const n of metricNames(r.expr!)) used.set(n, `alert ${r.alert}`);
  used.delete('up');
  t.ok(used.size >= 30, `${used.size} metrics used`);

  // The service with what registers the lazy metrics: a remote provider (result lag) and FCM (push sends).
  const soniox = await startFakeSoniox();
  t.teardown(() => soniox.close());
  const words = ['Hello', ' there', '.'].map((text, i) => ({ text, start_ms: 100 + i * 300, end_ms: 350 + i * 300, speaker: 1 }));
  soniox.script({ tokens: words, finalLagMs: 300 });
  const account = writeServiceAccount();
  const fcm = await startFakeFcm(account);
  t.teardown(() => fcm.close());
  const s = await startService(t, {
    env: { ROLE: 'all', STT_PROVIDERS: 'provider_b', PROVIDER_B_URL: soniox.url, PROVIDER_B_API_KEY: FAKE_SONIOX_KEY, FCM_SERVICE_ACCOUNT_FILE: account.file, FCM_TOKEN_URL: fcm.tokenUrl, FCM_BASE_URL: fcm.url },
  });

  // One live session: two seconds of audio through the codec shard to the provider, its words back as segments.
  const c = await open(s, { uid: 'u1', codec: 'pcm16', sample_rate: '16000' });
  await c.ready();
  const pcm = sine(300, 16000, 2, 3000);
  for (let i = 0; i < pcm.length; i += 1600) c.ws.send(new Uint8Array(pcm.buffer, i * 2, Math.min(1600, pcm.length - i) * 2).slice());
  await until(async () => {
    await advance(s, 600);
    const m = await c.json((x) => Array.isArray(x), 200).catch(() => undefined);
    return m?.some((x: { text: string }) => x.text.includes('there')) ?? false;
  }, { what: 'the provider’s words as segments', timeoutMs: 20_000 });

  // One job: a notification to a registered device goes out as a push job on the notifications queue.
  await s.req('/v1/users/fcm-token', { method: 'POST', headers: bearer(await s.token('u1')), body: { fcm_token: 'cPhone1234567890abcdef:APA91bFirstDevice' } });
  const app = await createApp(s, 'dev', 'Hydrate');
  await install(s, 'u1', app.id);
  const sent = await s.req(`/v2/integrations/${app.id}/notification?uid=u1&message=water`, { method: 'POST', headers: bearer(app.secret) });
  t.equal(sent.status, 200, 'notification accepted');
  await until(() => fcm.sent.length === 1, { what: 'the push', timeoutMs: 20_000 });

  let text = '';
  await until(async () => {
    text = (await s.req('/metrics')).text;
    return /^push_sends_total\{outcome="sent"\} 1$/m.test(text) && /^stt_result_lag_seconds_count\{provider="provider_b"\} [1-9]/m.test(text);
  }, { what: 'the push and the provider lag on /metrics', timeoutMs: 20_000 });
  const { types, samples } = exposition(text);

  for (const [name, where] of [...used].sort()) t.equal(missing(name, types), undefined, `${name} (${where})`);

  // What the queries group and join on is there with its labels.
  t.match(text, new RegExp(`^service_info\\{role="all",version="\\d+\\.\\d+\\.\\d+[^"]*",node="${hostname()}"\\} 1$`, 'm'), 'service_info names role, version and node');
  t.match(text, new RegExp(`^listen_sessions_max ${s.service.config.maxSessions}$`, 'm'), 'MAX_SESSIONS');
  t.match(text, /^listen_decode_delay_seconds_count\{shard="(\d+|main)"\} [1-9]/m, 'decode delay by shard');
  for (const queue of ['processing', 'webhooks', 'sync', 'notifications', 'day_summaries', 'transcribe_kept_audio']) {
    t.match(text, new RegExp(`^jobs_queued\\{queue="${queue}",state="waiting"\\} \\d+$`, 'm'), `jobs_queued for ${queue}`);
    t.match(text, new RegExp(`^jobs_oldest_waiting_seconds\\{queue="${queue}"\\} [\\d.e+-]+$`, 'm'), `jobs_oldest_waiting_seconds for ${queue}`);
  }
  t.ok(samples.has('store_transcript_writes_pending'), 'the group commit queue depth');
  c.close();
  await c.closed;
});
