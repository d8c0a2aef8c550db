// MCP keys and both transports, driven by the SDK's own clients over real sockets: Streamable HTTP at /v1/mcp and the
// older SSE transport at /v1/mcp/sse. What a key lists it can call; sessions open, end and expire as the spec says.
import t from 'tap';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { startService, type TestService } from '../helpers/service.js';
import { bearer, type TestResponse } from '../helpers/http.js';
import { until } from '../helpers/until.js';
import { MAX_SESSIONS_PER_KEY, SESSION_IDLE_MS } from '../../http/mcp.js';

const ALL_TOOLS = ['complete_action_item', 'create_memory', 'get_conversation', 'list_action_items', 'list_conversations', 'list_goals', 'list_memories', 'search_memories'];
const ALL_SCOPES = ['conversations:read', 'memories:read', 'action_items:read', 'goals:read', 'conversations:write', 'memories:write', 'action_items:write', 'goals:write'];

type Kind = 'streamable' | 'sse';

/** Creates an MCP key through the API (no `scopes` field when none are given); returns the creation answer. */
async function createMcpKey(s: TestService, uid: string, scopes?: string[]): Promise<{ key: string; id: string; scopes: string[] }> {
  const res = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(await s.token(uid)), body: { name: 'assistant', key_type: 'mcp', ...(scopes ? { scopes } : {}) } });
  if (res.status !== 200) throw new Error(`key creation answered ${res.status}`);
  return res.json;
}

function transport(kind: Kind, s: TestService, key: string | undefined): StreamableHTTPClientTransport | SSEClientTransport {
  const requestInit = { headers: key === undefined ? ({} as Record<string, string>) : { Authorization: `Bearer ${key}` } };
  return kind === 'streamable'
    ? new StreamableHTTPClientTransport(new URL(`${s.url}/v1/mcp`), { requestInit })
    : new SSEClientTransport(new URL(`${s.url}/v1/mcp/sse`), { requestInit });
}

async function connect(t: { teardown(fn: () => unknown): void }, kind: Kind, s: TestService, key: string): Promise<Client> {
  const client = new Client({ name: 'test-assistant', version: '1.0.0' });
  await client.connect(transport(kind, s, key));
  t.teardown(() => client.close());
  return client;
}

const parse = (r: unknown): any => JSON.parse((r as { content: { text: string }[] }).content[0]!.text);

/** A raw request to /v1/mcp (for what the SDK client never sends); an SSE answer is read to its end. */
function raw(s: TestService, method: string, headers: Record<string, string>, body?: unknown): Promise<TestResponse> {
  return s.req('/v1/mcp', {
    method,
    headers: { accept: 'application/json, text/event-stream', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

/** Opens a session by hand; returns its id. */
async function openSession(s: TestService, key: string): Promise<string> {
  const res = await raw(s, 'POST', bearer(key), INIT);
  if (res.status !== 200) throw new Error(`initialize answered ${res.status}`);
  const id = res.headers['mcp-session-id'] as string;
  await raw(s, 'POST', { ...bearer(key), 'mcp-session-id': id }, { jsonrpc: '2.0', method: 'notifications/initialized' });
  return id;
}

const listTools = (s: TestService, key: string, id: string): Promise<TestResponse> =>
  raw(s, 'POST', { ...bearer(key), 'mcp-session-id': id, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });

// One service for every test but the last (starting one is the slow part); each test has its own users.
const s = await startService(t);

for (const kind of ['streamable', 'sse'] as const) {
  t.test(`${kind}: a key created without scopes can call every tool it lists`, async (t) => {
      const created = await createMcpKey(s, `ada-${kind}`);
    t.same(created.scopes, ALL_SCOPES, 'creation says the key is full-access');
    const client = await connect(t, kind, s, created.key);
    const tools = (await client.listTools()).tools.map((x) => x.name).sort();
    t.same(tools, ALL_TOOLS);

    const memory = await client.callTool({ name: 'create_memory', arguments: { content: 'Ada keeps bees', category: 'hobbies' } });
    t.notOk(memory.isError, 'create_memory works');
    const id = parse(memory).id as string;
    const listed = parse(await client.callTool({ name: 'list_memories', arguments: {} }));
    t.match(listed, [{ id, content: 'Ada keeps bees', category: 'hobbies' }], 'read back through the same key');
    const found = parse(await client.callTool({ name: 'search_memories', arguments: { query: 'bees' } }));
    t.equal(found[0]?.id, id);
    for (const name of ['list_conversations', 'list_action_items', 'list_goals']) {
      const r = await client.callTool({ name, arguments: {} });
      t.notOk(r.isError, `${name} works`);
    }
  });

  t.test(`${kind}: a narrowed key lists only the tools it may call`, async (t) => {
      const { key } = await createMcpKey(s, `bo-${kind}`, ['memories:read', 'action_items:read']);
    const client = await connect(t, kind, s, key);
    t.same((await client.listTools()).tools.map((x) => x.name).sort(), ['list_action_items', 'list_memories', 'search_memories']);
    const refused = await client.callTool({ name: 'create_memory', arguments: { content: 'x' } });
    t.equal(refused.isError, true, 'an unlisted tool is not callable');
    t.same(parse(await client.callTool({ name: 'list_memories', arguments: {} })), []);

    const { key: none } = await createMcpKey(s, `bo-${kind}`, ['goals:write']);
    const bare = await connect(t, kind, s, none);
    t.same((await bare.listTools()).tools, [], 'a key that may call no tool lists none, without an error');
  });

  t.test(`${kind}: wrong-kind, missing and revoked keys are refused`, async (t) => {
      const dev = await s.devKey(`cy-${kind}`, ['memories:read']);
    const refusal = async (key: string | undefined): Promise<string> => {
      const client = new Client({ name: 'test-assistant', version: '1.0.0' });
      const err = await client.connect(transport(kind, s, key)).then(
        () => undefined,
        (e: Error & { code?: number }) => e,
      );
      await client.close();
      t.ok(err, 'connect fails');
      return `${err?.code} ${err?.message}`;
    };
    t.match(await refusal(dev), /401/, 'a developer key');
    t.match(await refusal(undefined), /401/, 'no key');

    const created = await createMcpKey(s, `cy-${kind}`);
    const client = await connect(t, kind, s, created.key);
    t.ok((await client.listTools()).tools.length > 0);
    const revoked = await s.req(`/v1/dev/keys/${created.id}`, { method: 'DELETE', headers: bearer(await s.token(`cy-${kind}`)) });
    t.equal(revoked.status, 204);
    t.match(await refusal(created.key), /401/, 'a revoked key cannot connect');
    if (kind === 'streamable') {
      // Every request is authenticated: the open session's next call is refused too.
      await t.rejects(client.listTools(), { code: 401 }, 'an open session of a revoked key is refused');
    } else {
      const res = await s.req('/v1/mcp/messages?sessionId=00000000-0000-0000-0000-000000000000', { method: 'POST', headers: bearer(created.key), body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
      t.equal(res.status, 401, 'an open session of a revoked key is refused');
    }
  });
}

t.test('streamable: refusals the wire shows (status, headers, JSON-RPC error bodies)', async (t) => {
  const dev = await s.devKey('dee', ['memories:read']);
  const { key } = await createMcpKey(s, 'dee');

  const wrongKind = await raw(s, 'POST', bearer(dev), INIT);
  t.equal(wrongKind.status, 401);
  t.equal(wrongKind.headers['x-error-code'], 'ENG_ERR_AUTH_KEY_WRONG_KIND');
  t.equal((await raw(s, 'POST', {}, INIT)).status, 401);

  const noSession = await raw(s, 'POST', bearer(key), { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  t.equal(noSession.status, 400, 'a request other than initialize needs a session');
  t.match(noSession.json, { jsonrpc: '2.0', error: { code: -32000 }, id: null });
  const getNoSession = await raw(s, 'GET', bearer(key));
  t.equal(getNoSession.status, 400);
  t.match(getNoSession.json, { error: { message: /Mcp-Session-Id/ } });

  const unknown = await raw(s, 'POST', { ...bearer(key), 'mcp-session-id': '00000000-0000-0000-0000-000000000000' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  t.equal(unknown.status, 404);
  t.match(unknown.json, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });

  const notJson = await raw(s, 'POST', bearer(key), '{"jsonrpc":');
  t.equal(notJson.status, 400);
  t.match(notJson.json, { error: { code: -32700 } }, 'a parse error is a JSON-RPC error, not a 422');
  const notRpc = await raw(s, 'POST', bearer(key), { hello: 1 });
  t.equal(notRpc.status, 400);
  t.match(notRpc.json, { error: { code: -32700 } });

  const id = await openSession(s, key);
  const listed = await listTools(s, key, id);
  t.equal(listed.status, 200);
  t.match(listed.headers['content-type'], /text\/event-stream/);
  t.match(listed.text, /event: message\ndata: \{.*"create_memory"/, 'answers come as server-sent events');
  const oldVersion = await raw(s, 'POST', { ...bearer(key), 'mcp-session-id': id, 'mcp-protocol-version': '1999-01-01' }, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
  t.equal(oldVersion.status, 400, 'an unsupported protocol version is refused');
  t.match(oldVersion.json, { error: { message: /Unsupported protocol version/ } });
  const notAccepting = await s.req('/v1/mcp', { method: 'POST', headers: { ...bearer(key), 'mcp-session-id': id, accept: 'text/html' }, body: { jsonrpc: '2.0', id: 4, method: 'tools/list' } });
  t.equal(notAccepting.status, 406);

  const other = (await createMcpKey(s, 'eve')).key;
  const hijack = await listTools(s, other, id);
  t.equal(hijack.status, 404, 'another key\'s session is not found');
  t.equal((await raw(s, 'DELETE', { ...bearer(other), 'mcp-session-id': id })).status, 404, 'nor can another key end it');
  t.equal((await listTools(s, key, id)).status, 200, 'the session is still its owner\'s');
});

t.test('streamable: DELETE ends a session; its id is then unknown', async (t) => {
  const { key } = await createMcpKey(s, 'fay');
  const tr = new StreamableHTTPClientTransport(new URL(`${s.url}/v1/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
  const client = new Client({ name: 'test-assistant', version: '1.0.0' });
  await client.connect(tr);
  t.teardown(() => client.close());
  const id = tr.sessionId!;
  t.match(id, /^[0-9a-f-]{36}$/);
  t.equal((await listTools(s, key, id)).status, 200);
  await tr.terminateSession();
  t.equal(tr.sessionId, undefined, 'the client forgets the session once the server has ended it');
  const after = await listTools(s, key, id);
  t.equal(after.status, 404);
  t.match(after.json, { error: { code: -32001 } });
});

t.test('streamable: the event stream is released when its client goes away', async (t) => {
  const { key } = await createMcpKey(s, 'gus');
  const id = await openSession(s, key);
  const headers = { ...bearer(key), 'mcp-session-id': id, accept: 'text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
  const open = (): Promise<{ status: number; req: http.ClientRequest }> =>
    new Promise((resolve, reject) => {
      const req = http.get(`${s.url}/v1/mcp`, { headers, agent: false }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, req });
      });
      req.on('error', reject);
    });
  const first = await open();
  t.equal(first.status, 200);
  const second = await raw(s, 'GET', headers);
  t.equal(second.status, 409, 'one stream per session');
  first.req.destroy();
  // Freed once the server hears of the disconnect; a new stream is then accepted.
  let again: { status: number; req: http.ClientRequest } | undefined;
  await until(async () => {
    again?.req.destroy();
    again = await open();
    return again.status === 200;
  }, { what: 'the stream to be released' });
  again!.req.destroy();
});

t.test('streamable: idle sessions expire and each key keeps a bounded number', async (t) => {
  const { key } = await createMcpKey(s, 'hal');
  const idle = await openSession(s, key);
  s.clock.advance(SESSION_IDLE_MS + 1);
  const fresh = await openSession(s, key);
  t.equal((await listTools(s, key, idle)).status, 404, 'an idle session is ended; its client initializes again');
  t.equal((await listTools(s, key, fresh)).status, 200);

  const ids = [fresh];
  for (let i = 1; i < MAX_SESSIONS_PER_KEY; i++) {
    s.clock.advance(1);
    ids.push(await openSession(s, key));
  }
  for (const id of ids) t.equal((await listTools(s, key, id)).status, 200);
  s.clock.advance(1);
  ids.push(await openSession(s, key));
  t.equal((await listTools(s, key, ids[0]!)).status, 404, 'past the bound, the key\'s least recently used session ends');
  t.equal((await listTools(s, key, ids.at(-1)!)).status, 200);
});

t.test('streamable: shutdown ends open event streams', async (t) => {
  const s = await startService(t);
  const { key } = await createMcpKey(s, 'ida');
  const id = await openSession(s, key);
  const { ended } = await new Promise<{ ended: Promise<void> }>((resolve, reject) => {
    const req = http.get(`${s.url}/v1/mcp`, { headers: { ...bearer(key), 'mcp-session-id': id, accept: 'text/event-stream' }, agent: false }, (res) => {
      resolve({ ended: new Promise<void>((done) => res.on('end', done).on('close', done)) });
      res.resume();
    });
    req.on('error', reject);
  });
  await s.service.stop();
  await ended;
  t.pass('the stream ended with the shutdown');
});
