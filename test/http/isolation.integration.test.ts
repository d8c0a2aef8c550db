// Isolation between users, walked from the OpenAPI document the server serves: for every operation, user A's
// credentials with user B's ids (404, nothing of B's in the answer, B's reads unchanged afterwards), and credentials
// that must fail (no header, keys of the wrong family or without the scope, revoked and unknown keys, bad ID tokens).
// The same run, with /v4/listen speech and the MCP tools, is logged at trace and every line scanned for secrets and
// user content. A route whose path parameter or request body has no entry below fails the test. The owner checks run
// on PostgreSQL too.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { startService, type TestService } from '../helpers/service.js';
import type { StoreKind } from '../helpers/stores.js';
import type { Logger } from '../../engine/logger.js';
import { bearer } from '../helpers/http.js';
import { ManualClock } from '../../engine/clock.js';
import { SCOPES } from '../../engine/protocol.js';
import { encodeWav } from '../../engine/audio/wav.js';
import { captureLogs } from '../helpers/log-capture.js';
import { describeHits, scanLines } from '../helpers/log-scan.js';
import { badIdTokens, Client, seed, tone, unknownKey, type Answer, type Call, type Holdings } from '../helpers/isolation.js';
import { receiver } from '../helpers/webhooks.js';
import { concat, silence, speak } from '../helpers/speech.js';
import { formFile, voice, SENTENCES } from '../helpers/voices.js';
import { advance, connect, open } from '../helpers/listen.js';
import { OpusEncoderStream } from '../../native/opus.js';
import { frames } from '../helpers/codec-fixtures.js';
import { until, waitFor } from '../helpers/until.js';

// Every documented route, each with data of two users and many refused credentials: a few minutes on a busy box.
t.setTimeout(360_000);

/**
 * Each path parameter: `foreign` ones name something of a user's own (A asking with B's answers 404); the others
 * are not ids (a webhook type) and take the value given.
 */
const PATH_PARAMS: Record<string, { foreign: true; of: (h: Holdings) => string } | { foreign: false; value: string }> = {
  key_id: { foreign: true, of: (h) => h.key_id },
  conversation_id: { foreign: true, of: (h) => h.conversation_id },
  folder_id: { foreign: true, of: (h) => h.folder_id },
  memory_id: { foreign: true, of: (h) => h.memory_id },
  action_item_id: { foreign: true, of: (h) => h.action_item_id },
  goal_id: { foreign: true, of: (h) => h.goal_id },
  person_id: { foreign: true, of: (h) => h.person_id },
  sample_id: { foreign: true, of: (h) => h.sample_id },
  app_id: { foreign: true, of: (h) => h.app_id },
  delivery_id: { foreign: true, of: (h) => h.delivery_id },
  id: { foreign: true, of: (h) => h.id },
  job_id: { foreign: true, of: (h) => h.job_id },
  upload_id: { foreign: true, of: (h) => h.upload_id },
  type: { foreign: false, value: 'memory_created' },
};

const wav = (): { body: Buffer; contentType: string } => formFile('files', 'note.wav', encodeWav(tone(1), 16000));

/**
 * What A sends to each operation besides the path: a valid body (so validation passes and the handler runs), the
 * query it needs, and the ids of B's that sit outside the path. `a` is A, `b` is B. Every operation with a request
 * body or a required query parameter needs an entry.
 */
type Extra = Partial<Pick<Call, 'body' | 'headers'>> & { query?: string };
const EXTRAS: Record<string, (a: Holdings, b: Holdings) => Extra> = {
  'POST /v1/dev/keys': () => ({ body: { name: 'walk key', scopes: ['memories:read'] } }),
  'PATCH /v1/dev/user/conversations/{conversation_id}': () => ({ body: { title: 'renamed by someone else' } }),
  'POST /v1/dev/user/conversations': () => ({ body: { text: 'A writes a conversation of their own.' } }),
  // A segment naming B's person: the answer must not carry B's person's name.
  'POST /v1/dev/user/conversations/from-segments': (_a, b) => ({ body: { transcript_segments: [{ text: 'A speaks.', start: 0, end: 1, person_id: b.person_id }] } }),
  'POST /v1/conversations': () => ({ body: {} }),
  'POST /v1/folders': () => ({ body: { name: 'walk folder' } }),
  'PATCH /v1/folders/{folder_id}': () => ({ body: { name: 'renamed' } }),
  'POST /v1/dev/user/memories': () => ({ body: { content: 'A remembers.' } }),
  'POST /v1/dev/user/memories/batch': () => ({ body: { memories: [{ content: 'A remembers more.' }] } }),
  'PATCH /v1/dev/user/memories/{memory_id}': () => ({ body: { content: 'changed' } }),
  'GET /v1/dev/user/action-items': (_a, b) => ({ query: `conversation_id=${b.conversation_id}` }),
  'POST /v1/dev/user/action-items': () => ({ body: { description: 'A acts.' } }),
  'POST /v1/dev/user/action-items/batch': () => ({ body: { action_items: [{ description: 'A acts more.' }] } }),
  'PATCH /v1/dev/user/action-items/{action_item_id}': () => ({ body: { completed: true } }),
  'POST /v1/dev/user/goals': () => ({ body: { title: 'A walks', target_value: 5 } }),
  'PATCH /v1/dev/user/goals/{goal_id}': () => ({ body: { title: 'changed' } }),
  'PATCH /v1/dev/user/goals/{goal_id}/progress': () => ({ query: 'current_value=1' }),
  'POST /v1/users/developer/webhook/{type}': () => ({ body: { url: '' } }),
  'POST /v1/apps': () => ({ body: { name: 'A app', capabilities: [] } }),
  'PATCH /v1/apps/{app_id}': () => ({ body: { name: 'taken over' } }),
  'PATCH /v1/users/settings': () => ({ body: { language: 'en' } }),
  'POST /v1/users/fcm-token': () => ({ body: { fcm_token: 'a-device-of-A' } }),
  'DELETE /v1/users/fcm-token': (_a, b) => ({ body: { fcm_token: b.fcmToken } }),
  'POST /v1/notifications/read': (_a, b) => ({ body: { ids: b.notificationIds } }),
  // A's own app's secret, for B, who has not installed it.
  'POST /v2/integrations/{app_id}/notification': (_a, b) => ({ query: `uid=${b.uid}&message=hello` }),
  'POST /v2/voice-message/transcribe': () => {
    const f = wav();
    return { body: f.body, headers: { 'content-type': f.contentType } };
  },
  'POST /v2/voice-messages': () => {
    const f = wav();
    return { body: f.body, headers: { 'content-type': f.contentType } };
  },
  // B's finished uploads named in A's batch.
  'POST /v2/sync-local-files': (_a, b) => ({ body: { uploads: [b.upload_id] } }),
  'POST /v2/sync-local-files/uploads': () => ({ body: { filename: 'rec_1700000000.wav', size: 100 } }),
  'PATCH /v2/sync-local-files/uploads/{upload_id}': () => ({ body: Buffer.alloc(100), headers: { 'content-type': 'application/offset+octet-stream', 'upload-offset': '0' } }),
  'POST /v3/upload-audio': () => {
    const f = formFile('file', 'profile.wav', encodeWav(tone(1), 16000));
    return { body: f.body, headers: { 'content-type': f.contentType } };
  },
  'POST /v1/users/people': () => ({ body: { name: 'A person' } }),
  'PATCH /v1/users/people/{person_id}': () => ({ body: { name: 'renamed' } }),
  // B's assistant sessions, named by A's key.
  'POST /v1/mcp': (_a, b) => ({ body: { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers: { 'mcp-session-id': b.mcpSession, accept: 'application/json, text/event-stream' } }),
  'GET /v1/mcp': (_a, b) => ({ headers: { 'mcp-session-id': b.mcpSession, accept: 'text/event-stream' } }),
  'DELETE /v1/mcp': (_a, b) => ({ headers: { 'mcp-session-id': b.mcpSession } }),
  'POST /v1/mcp/messages': (_a, b) => ({ query: `sessionId=${b.mcpSseSession}`, body: { jsonrpc: '2.0', id: 3, method: 'tools/list' } }),
};

/** What A gets where no path parameter is B's but the request names something of B's elsewhere. */
const FOREIGN_ELSEWHERE: Record<string, (r: Answer) => boolean> = {
  'GET /v1/dev/user/action-items': (r) => r.status === 200 && Array.isArray(r.json) && r.json.length === 0,
  'DELETE /v1/users/fcm-token': (r) => r.status === 404,
  'POST /v1/notifications/read': (r) => r.status === 200 && r.json?.updated === 0,
  'POST /v2/integrations/{app_id}/notification': (r) => r.status === 404,
  'POST /v2/sync-local-files': (r) => r.status === 400,
  'POST /v1/mcp': (r) => r.status === 404,
  'GET /v1/mcp': (r) => r.status === 404,
  'DELETE /v1/mcp': (r) => r.status === 404,
  'POST /v1/mcp/messages': (r) => r.status === 404,
};

/** Answers that stream: A's call reads only the first chunk. */
const STREAMS = new Set(['GET /v1/notifications/stream', 'GET /v1/mcp/sse']);

/** Operations A may perform on B's public app: they concern A's own view and installation. */
const PUBLIC_APP_ALLOWED = new Set(['GET /v1/apps/{app_id}', 'POST /v1/apps/{app_id}/install', 'DELETE /v1/apps/{app_id}/install']);
/** Fields of an app only its owner sees. */
const OWNER_ONLY = ['webhook_url', 'setup_completed_url', 'secret_prefix', 'webhook_enabled', 'secret'];

type Security = 'none' | 'id' | 'key' | 'keyOrId' | 'mcp';

interface Operation {
  name: string;
  method: string;
  path: string;
  security: Security;
  scope?: string;
  documented: Set<string>;
  params: string[];
  hasBody: boolean;
  requiredQuery: string[];
}

function operations(doc: any): Operation[] {
  const out: Operation[] = [];
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const sec = (op.security ?? []) as Record<string, string[]>[];
      const names = sec.map((s) => Object.keys(s)[0]);
      const security: Security = names.length === 0 ? 'none' : names.includes('McpKey') ? 'mcp' : names.includes('ApiKey') ? (names.includes('IdToken') ? 'keyOrId' : 'key') : 'id';
      const scope = sec.find((s) => s.ApiKey)?.ApiKey?.[0];
      out.push({
        name: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        security,
        ...(scope ? { scope } : {}),
        documented: new Set(Object.keys(op.responses ?? {})),
        params: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!),
        hasBody: op.requestBody !== undefined,
        requiredQuery: ((op.parameters ?? []) as { in: string; name: string; required: boolean }[]).filter((p) => p.in === 'query' && p.required).map((p) => p.name),
      });
    }
  }
  return out;
}

/** The path with each parameter filled: B's value where `foreign` says so, else A's (or the fixed value). */
function fill(op: Operation, a: Holdings, b: Holdings, foreign: Set<string>, appOf: (h: Holdings) => string = (h) => h.app_id): string {
  return op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    const p = PATH_PARAMS[name]!;
    if (!p.foreign) return p.value;
    const h = foreign.has(name) ? b : a;
    return encodeURIComponent(name === 'app_id' ? appOf(h) : p.of(h));
  });
}

const PHRASE = 'the weather is nice today';

/** Everything the walk's parts share: the service, the two users' data, and what the parts collect. */
interface Walk {
  ts: TestService;
  c: Client;
  dir: string;
  doc: any;
  ops: Operation[];
  a: Holdings;
  b: Holdings;
  /** B's reads: every documented GET with B's own ids and credentials, as comparable values. */
  bReads: () => Promise<Record<string, unknown>>;
  before: Record<string, unknown>;
  bSecrets: string[];
  check: (label: string, op: Operation, r: Answer, allowIds?: string[]) => void;
  send: (op: Operation, call: Call) => Promise<Answer>;
  leaks: string[];
  undocumented: string[];
  wrong: string[];
}

/** A service on `store` with the data of two users, A and B, and B's reads before anything of A's ran. */
async function prepare(t: Test, store: StoreKind, logger?: Logger): Promise<Walk | undefined> {
  // An afternoon: the on-demand day summary covers today's conversations.
  const clock = new ManualClock(Date.parse('2026-11-20T15:00:00Z'));
  const rx = await receiver(t);
  const ts = await startService(t, {
    clock,
    store,
    ...(logger ? { logger } : {}),
    env: { WEBHOOK_ALLOW_PRIVATE: 'on', RATE_LIMIT_PER_MINUTE: '10000000', RATE_LIMIT_PER_DAY: '1000000000' },
  });
  const c = new Client(ts.url);
  t.teardown(() => c.close());
  // Not t.testdir(): it empties the service's data dir.
  const dir = mkdtempSync(path.join(tmpdir(), 'isolation-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sampleVoice = voice(dir, 'sample', 'en-us+m3', SENTENCES[0]!);

  const doc = (await c.send({ method: 'GET', path: '/v1/dev/openapi.json' })).json;
  const ops = operations(doc);
  t.ok(ops.length > 80, `${ops.length} documented operations`);

  // Every operation must be walkable: its path parameters mapped, its body and required query given.
  const unmapped = ops.flatMap((op) => [
    ...op.params.filter((p) => !PATH_PARAMS[p]).map((p) => `${op.name}: path parameter {${p}}`),
    ...(op.hasBody && !EXTRAS[op.name] ? [`${op.name}: request body`] : []),
    ...(op.requiredQuery.length > 0 && !EXTRAS[op.name] ? [`${op.name}: query ${op.requiredQuery.join(', ')}`] : []),
  ]);
  t.same(unmapped, [], 'every path parameter, request body and required query has an entry in the walk');
  if (unmapped.length > 0) return undefined;

  const a = await seed(ts, c, 'alpha-user', 'alpha-canary-7q', rx.url, sampleVoice);
  const b = await seed(ts, c, 'bravo-user', 'bravo-canary-7q', rx.url, sampleVoice);
  t.teardown(() => {
    a.closeSse();
    b.closeSse();
  });

  // B's speech profile (A has none) and a voice message with words of its own, for the log scan.
  const profilePcm = concat(silence(1), ...SENTENCES.slice(1, 4).map((s, i) => voice(dir, `profile-${i}`, 'en-us+f2', s)), silence(1));
  const profile = formFile('file', 'profile.wav', encodeWav(profilePcm, 16000));
  const up = await c.send({ method: 'POST', path: '/v3/upload-audio', headers: { ...bearer(b.token), 'content-type': profile.contentType }, body: profile.body });
  t.equal(up.status, 200, `B's speech profile stored (${up.headers['x-error-code'] ?? 'no error'})`);
  const spoken = formFile('files', 'message.wav', encodeWav(concat(silence(0.5), speak(dir, PHRASE, 'vm'), silence(0.5)), 16000));
  const vm = await c.send({ method: 'POST', path: '/v2/voice-messages', headers: { ...bearer(b.token), 'content-type': spoken.contentType }, body: spoken.body });
  t.equal(vm.status, 200, `B's voice message transcribed (${vm.headers['x-error-code'] ?? 'no error'})`);

  /** B's reads: every documented GET with B's own ids and credentials, as comparable values. */
  const bReads = async (): Promise<Record<string, unknown>> => {
    const out: Record<string, unknown> = {};
    for (const op of ops) {
      if (op.method !== 'GET' || op.security === 'none' || op.security === 'mcp' || STREAMS.has(op.name)) continue;
      const path = fill(op, b, b, new Set(op.params));
      const q = doc.paths[op.path].get.parameters.some((p: { name: string }) => p.name === 'include_transcript') ? '?include_transcript=true' : '';
      const cred = op.security === 'key' ? b.devKey : b.token;
      const r = await c.send({ method: 'GET', path: path + q, headers: bearer(cred) });
      out[op.name] = { status: r.status, body: r.json === undefined ? r.body.toString('base64').length + ':' + r.body.subarray(0, 64).toString('hex') : JSON.parse(JSON.stringify(r.json, (k, v) => (k === 'last_used_at' ? undefined : v))) };
    }
    out['push tokens'] = (await ts.service.services.userSettings.tokens(b.uid)).map((x) => x.token);
    return out;
  };
  await bReads(); // the first read creates what a read creates (the webhook secret)
  const before = await bReads();
  for (const [name, v] of Object.entries(before)) if ((v as { status?: number }).status !== undefined && (v as { status: number }).status >= 400) t.fail(`B's own read ${name} failed: ${JSON.stringify(v).slice(0, 200)}`);

  // Everything of B's that A must never see: the canary in B's texts, B's ids, B's secrets.
  const bSecrets = [b.devKey, b.mcpKey, b.appSecret, b.publicAppSecret, b.fcmToken, ...b.webhookSecrets, b.mcpSession, b.mcpSseSession];
  const bIds = [b.conversation_id, b.folder_id, b.memory_id, b.action_item_id, b.goal_id, b.person_id, b.sample_id, b.app_id, b.delivery_id, b.id, b.job_id, b.upload_id, b.key_id];
  const leaks: string[] = [];
  const undocumented: string[] = [];
  const wrong: string[] = [];
  const check = (label: string, op: Operation, r: Answer, allowIds: string[] = []): void => {
    if (!op.documented.has(String(r.status))) undocumented.push(`${label}: ${r.status} ${r.headers['x-error-code'] ?? ''}`);
    const text = r.text;
    for (const s of [b.canary, ...bSecrets, ...bIds.filter((x) => !allowIds.includes(x))]) {
      if (text.includes(s)) leaks.push(`${label}: the answer (${r.status}) holds ${s === b.canary ? 'B\'s content' : `B's ${s.slice(0, 12)}…`}`);
    }
  };
  const send = (op: Operation, call: Call): Promise<Answer> => (STREAMS.has(op.name) ? c.peek(call) : c.send(call));
  return { ts, c, dir, doc, ops, a, b, bReads, before, bSecrets, check, send, leaks, undocumented, wrong };
}

/** A with B's ids over every operation: 404 (or the documented answer), and nothing of B's in any answer. */
function ownerWalk(t: Test, w: Walk): void {
  const { c, ops, a, b, check, send, leaks, wrong } = w;
  t.test('A with B\'s ids: not found, and nothing of B\'s in any answer', async (t) => {
    for (const op of ops) {
      // A deleting their own account would end the walk; account-deletion.integration checks what it leaves of others.
      if (op.name === 'GET /v1/dev/openapi.json' || op.name === 'DELETE /v1/users/delete-account') continue;
      const extra = EXTRAS[op.name]?.(a, b) ?? {};
      const cred = op.security === 'mcp' ? a.mcpKey : op.security === 'key' || op.security === 'keyOrId' ? a.devKey : op.security === 'none' ? a.publicAppSecret : a.token;
      const foreignParams = op.params.filter((p) => PATH_PARAMS[p]!.foreign);
      // Every foreign parameter B's; then, with several, each one alone B's (the others A's own).
      const variants: Set<string>[] = foreignParams.length === 0 ? [new Set()] : [new Set(foreignParams), ...(foreignParams.length > 1 ? foreignParams.map((p) => new Set([p])) : [])];
      for (const foreign of variants) {
        // The direct notification is A's app's: its path keeps A's app and names B in the query.
        const f = op.name === 'POST /v2/integrations/{app_id}/notification' ? new Set<string>() : foreign;
        const appOf = op.security === 'none' ? (h: Holdings) => h.public_app_id : undefined;
        const path = fill(op, a, b, f, appOf) + (extra.query ? `?${extra.query}` : '');
        const label = `${op.name} [${[...f].join(',') || 'no B id in path'}]`;
        const r = await send(op, { method: op.method, path, headers: { ...extra.headers, ...bearer(cred) }, ...(extra.body !== undefined ? { body: extra.body } : {}) });
        check(label, op, r);
        if (f.size > 0) {
          if (r.status !== 404 && !(r.status === 403 && op.documented.has('403'))) wrong.push(`${label}: ${r.status} ${r.text.slice(0, 120)}`);
        } else if (FOREIGN_ELSEWHERE[op.name]) {
          if (!FOREIGN_ELSEWHERE[op.name]!(r)) wrong.push(`${label}: ${r.status} ${r.text.slice(0, 120)}`);
        } else if (r.status >= 500 && r.status !== 502 && r.status !== 503) {
          wrong.push(`${label}: ${r.status} ${r.text.slice(0, 120)}`);
        }
      }
      // B's public app: A sees it without the owner's fields, may install it, and may do nothing else with it.
      if (op.params.includes('app_id') && op.security !== 'none') {
        const path = fill(op, a, b, new Set(['app_id']), (h) => h.public_app_id) + (extra.query ? `?${extra.query}` : '');
        const label = `${op.name} [B's public app]`;
        const r = await send(op, { method: op.method, path, headers: { ...extra.headers, ...bearer(cred) }, ...(extra.body !== undefined ? { body: extra.body } : {}) });
        check(label, op, r, [b.public_app_id]);
        if (PUBLIC_APP_ALLOWED.has(op.name)) {
          if (r.status >= 400) wrong.push(`${label}: ${r.status} ${r.text.slice(0, 120)}`);
          const seen = OWNER_ONLY.filter((k) => r.json && typeof r.json === 'object' && k in r.json);
          if (seen.length > 0) leaks.push(`${label}: owner-only fields ${seen.join(', ')}`);
        } else if (r.status !== 404) {
          wrong.push(`${label}: ${r.status} ${r.text.slice(0, 120)}`);
        }
      }
    }
    // A's app secret on B's public app's path, and B's app secret for A's own app.
    const direct = ops.find((o) => o.name === 'POST /v2/integrations/{app_id}/notification')!;
    for (const [label, appId, secret] of [['A\'s secret on B\'s app', b.public_app_id, a.publicAppSecret], ['B\'s private app secret on B\'s public app', b.public_app_id, b.appSecret]] as const) {
      const r = await c.send({ method: 'POST', path: `/v2/integrations/${appId}/notification?uid=${b.uid}&message=hello`, headers: bearer(secret) });
      check(`direct notification, ${label}`, direct, r, [b.public_app_id]);
      if (r.status !== 401 || r.headers['x-error-code'] !== 'ENG_ERR_AUTH_KEY_INVALID') wrong.push(`direct notification, ${label}: ${r.status} ${r.text}`);
    }
    t.same(wrong, [], 'A gets 404 for B\'s ids, and the documented answer elsewhere');
    t.same(leaks, [], 'no answer to A holds anything of B\'s');
  });
}

/** After A's walk: every read of B's answers as before. */
function bUnchanged(t: Test, w: Walk): void {
  const { c, b, bReads, before, undocumented } = w;
  t.test('B\'s data is as it was', async (t) => {
    const after = await bReads();
    for (const name of Object.keys(before)) t.same(after[name], before[name], name);
    // B's assistant sessions still answer B.
    const r = await c.send({ method: 'POST', path: `/v1/mcp/messages?sessionId=${b.mcpSseSession}`, headers: bearer(b.mcpKey), body: { jsonrpc: '2.0', id: 99, method: 'ping' } });
    t.equal(r.status, 202, 'B\'s SSE session is still B\'s');
    t.same(undocumented, [], 'every answer has a documented status');
  });
}

t.test('isolation walk over every documented operation, with every log line scanned', async (t) => {
  const logs = captureLogs();
  const w = await prepare(t, 'sqlite', logs.logger);
  if (!w) return;
  const { ts, c, dir, ops, a, b, check, send, leaks } = w;
  ownerWalk(t, w);

  t.test('credentials that must fail: 401, or 403 for a missing scope, with the documented code and shape', async (t) => {
    leaks.length = 0; // each part reports its own
    const tokens = await badIdTokens(ts, a.uid);
    // For each scope, a key of A's with every other scope.
    const lacking: Record<string, string> = {};
    for (const scope of SCOPES) lacking[scope] = await ts.devKey(a.uid, SCOPES.filter((s) => s !== scope));
    const failures: string[] = [];
    let cases = 0;
    for (const op of ops) {
      if (op.security === 'none' && op.name !== 'POST /v2/integrations/{app_id}/notification') continue;
      const extra = EXTRAS[op.name]?.(a, b) ?? {};
      const path = fill(op, a, b, new Set(op.params.filter((p) => PATH_PARAMS[p]!.foreign)), op.security === 'none' ? (h) => h.public_app_id : undefined) + (extra.query ? `?${extra.query}` : '');
      const expect: [string, string | undefined, number, string][] = [];
      const tokenCode = op.security === 'id' || op.security === 'keyOrId' ? 'ENG_ERR_AUTH_TOKEN_INVALID' : 'ENG_ERR_AUTH_KEY_INVALID';
      switch (op.security) {
        case 'id':
          expect.push(['no credentials', undefined, 401, 'ENG_ERR_AUTH_NOT_AUTHENTICATED'], ['a developer key', a.devKey, 401, tokenCode], ['an assistant key', a.mcpKey, 401, tokenCode], ['an app secret', a.appSecret, 401, tokenCode]);
          break;
        case 'key':
        case 'keyOrId':
          expect.push(
            ['no credentials', undefined, 401, 'ENG_ERR_AUTH_HEADER_MISSING'],
            ['an assistant key', a.mcpKey, 401, 'ENG_ERR_AUTH_KEY_WRONG_KIND'],
            ['an app secret', a.appSecret, 401, 'ENG_ERR_AUTH_KEY_WRONG_KIND'],
            ['a revoked key', a.revokedKey, 401, 'ENG_ERR_AUTH_KEY_INVALID'],
            ['a key never issued', unknownKey(), 401, 'ENG_ERR_AUTH_KEY_INVALID'],
            ['a key with a bad checksum', `${a.devKey.slice(0, -1)}${a.devKey.endsWith('A') ? 'B' : 'A'}`, 401, 'ENG_ERR_AUTH_KEY_INVALID'],
            ['a key without the scope', lacking[op.scope!], 403, 'ENG_ERR_AUTH_SCOPE_MISSING'],
          );
          if (op.security === 'key') expect.push(['a valid ID token', a.token, 401, 'ENG_ERR_AUTH_KEY_INVALID']);
          break;
        case 'mcp':
          expect.push(
            ['no credentials', undefined, 401, 'ENG_ERR_AUTH_HEADER_MISSING'],
            ['a developer key', a.devKey, 401, 'ENG_ERR_AUTH_KEY_WRONG_KIND'],
            ['an app secret', a.appSecret, 401, 'ENG_ERR_AUTH_KEY_WRONG_KIND'],
            ['a revoked assistant key', a.revokedMcpKey, 401, 'ENG_ERR_AUTH_KEY_INVALID'],
            ['a valid ID token', a.token, 401, 'ENG_ERR_AUTH_KEY_INVALID'],
          );
          break;
        case 'none':
          expect.push(['no credentials', undefined, 401, 'ENG_ERR_AUTH_HEADER_MISSING'], ['a developer key', a.devKey, 401, 'ENG_ERR_AUTH_KEY_INVALID'], ['a valid ID token', a.token, 401, 'ENG_ERR_AUTH_KEY_INVALID']);
          break;
      }
      if (op.security !== 'none') for (const [what, tok] of Object.entries(tokens)) expect.push([`ID token: ${what}`, tok, 401, tokenCode]);
      const started = Date.now();
      for (const [what, cred, status, code] of expect) {
        cases++;
        const headers = { ...extra.headers, ...(cred === undefined ? {} : bearer(cred)) };
        // A stream wrongly opened would never end: read its first chunk only.
        const r = await send(op, { method: op.method, path, headers, ...(extra.body !== undefined ? { body: extra.body } : {}) });
        const label = `${op.name} with ${what}`;
        check(label, op, r);
        const detailOk = typeof r.json?.detail === 'string' && (status !== 403 || r.json.detail === `Insufficient permissions. Required scope: ${op.scope}`);
        if (r.status !== status || r.headers['x-error-code'] !== code || !detailOk) failures.push(`${label}: ${r.status} ${r.headers['x-error-code']} ${r.text.slice(0, 100)}`);
      }
      if (Date.now() - started > 5000) t.comment(`${op.name}: ${expect.length} refusals took ${Date.now() - started} ms`);
    }
    t.ok(cases > 1000, `${cases} refused requests`);
    t.same(failures, [], 'each refusal has its status, code and {"detail": "..."} body');
    t.same(leaks, [], 'no refusal holds anything of B\'s');
  });

  t.test('the assistant tools of A cannot reach B\'s data', async (t) => {
    leaks.length = 0; // each part reports its own
    const session = await (async () => {
      const r = await c.send({ method: 'POST', path: '/v1/mcp', headers: { ...bearer(a.mcpKey), accept: 'application/json, text/event-stream' }, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'walk', version: '1' } } } });
      return r.headers['mcp-session-id'] as string;
    })();
    const headers = { ...bearer(a.mcpKey), accept: 'application/json, text/event-stream', 'mcp-session-id': session };
    await c.send({ method: 'POST', path: '/v1/mcp', headers, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
    const calls: [string, Record<string, unknown>][] = [
      ['get_conversation', { conversation_id: b.conversation_id, include_transcript: true }],
      ['complete_action_item', { action_item_id: b.action_item_id }],
      ['list_memories', {}],
      ['search_memories', { query: 'tulips' }],
      ['list_conversations', {}],
      ['list_action_items', {}],
      ['list_goals', { include_inactive: true }],
    ];
    const op = ops.find((o) => o.name === 'POST /v1/mcp')!;
    let n = 10;
    for (const [name, args] of calls) {
      const r = await c.send({ method: 'POST', path: '/v1/mcp', headers, body: { jsonrpc: '2.0', id: n++, method: 'tools/call', params: { name, arguments: args } } });
      t.equal(r.status, 200, `${name}: answered`);
      check(`mcp tool ${name}`, op, r);
      if (name === 'get_conversation' || name === 'complete_action_item') t.match(r.text, /ENG_ERR_RESOURCE_NOT_FOUND|not found/i, `${name} with B's id: not found`);
    }
    t.same(leaks, [], 'no tool answer holds anything of B\'s');
  });

  t.test('/v4/listen: A cannot open B\'s stream; bad credentials are refused before the upgrade', async (t) => {
    const tokens = await badIdTokens(ts, a.uid);
    const q = { uid: b.uid, codec: 'pcm16', sample_rate: '16000' };
    const refused: string[] = [];
    const cases: [string, string | null][] = [['A\'s token for B\'s uid', a.token], ['no credentials', null], ['B\'s developer key', b.devKey], ['B\'s assistant key', b.mcpKey], ...Object.entries(tokens).map(([w, tok]) => [`ID token: ${w}`, tok] as [string, string])];
    for (const [what, cred] of cases) {
      const r = await connect(ts, { ...q, uid: what.startsWith('ID token') ? a.uid : b.uid }, cred);
      if (r.client) {
        r.client.close();
        refused.push(`${what}: upgraded`);
      } else if (r.status !== 401) refused.push(`${what}: ${r.status}`);
      else if (r.body.includes(b.canary) || r.body.includes(b.uid)) refused.push(`${what}: the refusal names B`);
    }
    t.same(refused, [], 'every one refused with 401 and nothing of B\'s');
  });

  bUnchanged(t, w);

  const heard: string[] = [];
  t.test('a live session with real speech, of a third user (B stays as it was), for the log scan', async (t) => {
    const client = await open(ts, { uid: 'carol-user', codec: 'opus_fs320', sample_rate: '16000', source: 'omi' });
    await client.ready();
    const actor = ts.service.sessions.sessionsOf('carol-user')[0]!;
    const pcm = concat(silence(0.5), speak(dir, PHRASE, 'live'), silence(1));
    const enc = new OpusEncoderStream(16000);
    const packets = frames(pcm, 320).map((f) => enc.encode(f));
    for (const p of packets) client.ws.send(p);
    await until(() => actor.stats.audioMessages === packets.length, { what: 'every packet received' });
    const segments: { text: string }[] = await waitFor(async () => {
      await advance(ts, 600);
      return client.json((m) => Array.isArray(m) && m.length > 0, 250).catch(() => undefined);
    }, { what: 'transcript segments', timeoutMs: 60_000 });
    heard.push(...segments.map((s) => s.text).filter((x) => x.trim().length >= 6));
    t.ok(heard.length > 0, `heard "${heard.join(' | ')}"`);
    client.close();
    await client.closed;
    await until(() => ts.service.sessions.size === 0, { what: 'session drained', timeoutMs: 30_000 });
  });

  t.test('no log line holds a secret or user content', async (t) => {
    const secrets = [a, b].flatMap((h) => [h.token, h.devKey, h.mcpKey, h.revokedKey, h.revokedMcpKey, h.appSecret, h.publicAppSecret, h.fcmToken, ...h.webhookSecrets]);
    const phrases = [a.canary, b.canary, PHRASE, ...heard, ...SENTENCES, 'water the tulips', 'call the gardener'];
    const hits = scanLines(logs.lines, 'isolation walk', { secrets, phrases });
    // The service logs static messages with ids, not requests: a few dozen lines for the whole walk.
    const messages = new Set(logs.lines.map((l) => (JSON.parse(l) as { msg?: string }).msg));
    t.ok(messages.has('api key created') && messages.has('listening'), `${logs.lines.length} log lines of ${messages.size} kinds captured at trace`);
    t.equal(hits.length, 0, hits.length === 0 ? 'no hits' : describeHits(hits.slice(0, 40)));
  });
});

// The owner checks again on PostgreSQL, whose queries differ from sqlite's; the credential matrix, the assistant
// tools, /v4/listen and the log scan do not depend on the store and run once, above.
t.test('on PostgreSQL: A with B\'s ids over every operation, and B\'s data as it was', async (t) => {
  const w = await prepare(t, 'pg');
  if (!w) return;
  ownerWalk(t, w);
  bUnchanged(t, w);
});
