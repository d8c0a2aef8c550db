// The MCP server driven by the SDK's own client over a real socket: svc_mcp_ keys only, tools scoped, data from the store.
import t from 'tap';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { startService, type TestService } from '../helpers/service.js';
import { bearer } from '../helpers/http.js';

async function mcpKey(s: TestService, uid: string, scopes: string[]): Promise<string> {
  const res = await s.req('/v1/dev/keys', { method: 'POST', headers: bearer(await s.token(uid)), body: { name: 'assistant', key_type: 'mcp', scopes } });
  return res.json.key as string;
}

async function connect(t: { teardown(fn: () => unknown): void }, s: TestService, key: string): Promise<Client> {
  const client = new Client({ name: 'test-assistant', version: '1.0.0' });
  const transport = new SSEClientTransport(new URL(`${s.url}/v1/mcp/sse`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  t.teardown(() => client.close());
  return client;
}

const parse = (r: unknown): any => JSON.parse(((r as { content: { text: string }[] }).content[0]!).text);

t.test('MCP over SSE', async (t) => {
  const s = await startService(t);
  const dev = await s.devKey('mia', ['memories:read', 'memories:write', 'action_items:read', 'action_items:write', 'conversations:write']);
  const key = await mcpKey(s, 'mia', ['memories:read', 'memories:write', 'conversations:read', 'action_items:read', 'action_items:write', 'goals:read']);

  // Some data through the REST API first.
  await s.req('/v1/dev/user/memories', { method: 'POST', headers: bearer(dev), body: { content: 'Mia plays the cello on weekends', category: 'hobbies' } });
  await s.req('/v1/dev/user/memories', { method: 'POST', headers: bearer(dev), body: { content: 'Mia works as a nurse', category: 'work' } });
  const item = await s.req('/v1/dev/user/action-items', { method: 'POST', headers: bearer(dev), body: { description: 'Buy cello strings' } });

  const client = await connect(t, s, key);
  const tools = (await client.listTools()).tools.map((x) => x.name).sort();
  t.same(tools, ['complete_action_item', 'create_memory', 'get_conversation', 'list_action_items', 'list_conversations', 'list_goals', 'list_memories', 'search_memories']);

  const found = parse(await client.callTool({ name: 'search_memories', arguments: { query: 'cello' } }));
  t.equal(found.length, 1);
  t.match(found[0], { content: 'Mia plays the cello on weekends', category: 'hobbies' });

  const created = parse(await client.callTool({ name: 'create_memory', arguments: { content: 'Mia is allergic to cats', category: 'core' } }));
  t.match(created, { id: String, content: 'Mia is allergic to cats' });
  const rest = await s.req('/v1/dev/user/memories', { headers: bearer(dev) });
  t.ok(rest.json.some((m: { id: string }) => m.id === created.id), 'what the assistant wrote is in the store');

  const done = parse(await client.callTool({ name: 'complete_action_item', arguments: { action_item_id: item.json.id } }));
  t.equal(done.completed, true);
  t.ok(done.completed_at);
  const open = parse(await client.callTool({ name: 'list_action_items', arguments: { completed: false } }));
  t.same(open, []);

  const missing = await client.callTool({ name: 'get_conversation', arguments: { conversation_id: 'nope' } });
  t.equal(missing.isError, true);
  t.match((missing as { content: { text: string }[] }).content[0]!.text, /ENG_ERR_RESOURCE_NOT_FOUND/);

  const bad = await client.callTool({ name: 'create_memory', arguments: { content: '' } });
  t.equal(bad.isError, true, 'input validated against the tool schema');
});

t.test('scopes and the memory gate apply to tools', async (t) => {
  const s = await startService(t, { env: { MEMORY_ACCESS_DEFAULT: 'disabled' } });
  const key = await mcpKey(s, 'noah', ['action_items:read', 'memories:read']);
  const client = await connect(t, s, key);
  t.same((await client.listTools()).tools.map((x) => x.name).sort(), ['list_action_items', 'list_memories', 'search_memories'], 'only what the scopes allow is listed');
  const denied = await client.callTool({ name: 'create_memory', arguments: { content: 'x' } });
  t.equal(denied.isError, true);
  t.match((denied as { content: { text: string }[] }).content[0]!.text, /Tool create_memory not found/);
  const gated = await client.callTool({ name: 'list_memories', arguments: {} });
  t.equal(gated.isError, true);
  t.match((gated as { content: { text: string }[] }).content[0]!.text, /developer_memory_access_not_ready/);
  t.same(parse(await client.callTool({ name: 'list_action_items', arguments: {} })), []);
});

t.test('key families: dev keys get 401 on MCP, MCP keys 401 on REST; sessions belong to their key', async (t) => {
  const s = await startService(t);
  const dev = await s.devKey('olga', ['memories:read']);
  const key = await mcpKey(s, 'olga', ['memories:read']);
  const other = await mcpKey(s, 'pat', ['memories:read']);

  const devOnMcp = await s.req('/v1/mcp/sse', { headers: bearer(dev) });
  t.equal(devOnMcp.status, 401);
  t.equal(devOnMcp.headers['x-error-code'], 'ENG_ERR_AUTH_KEY_WRONG_KIND');
  const none = await s.req('/v1/mcp/sse');
  t.equal(none.status, 401);
  const mcpOnRest = await s.req('/v1/dev/user/memories', { headers: bearer(key) });
  t.equal(mcpOnRest.status, 401);

  const client = await connect(t, s, key);
  t.ok((await client.listTools()).tools.length > 0);
  const hijack = await s.req('/v1/mcp/messages?sessionId=00000000-0000-0000-0000-000000000000', { method: 'POST', headers: bearer(other), body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
  t.equal(hijack.status, 404, 'an unknown session (or another key\'s) is not found');
  const notRpc = await s.req('/v1/mcp/messages?sessionId=x', { method: 'POST', headers: bearer(key), body: { hello: 1 } });
  t.equal(notRpc.status, 404);
});

t.test('shutdown ends open MCP streams', async (t) => {
  const s = await startService(t);
  const key = await mcpKey(s, 'quinn', ['memories:read']);
  // A raw reader: EventSource clients reconnect by design, so watch the stream itself end.
  const { events, ended } = await new Promise<{ events: string[]; ended: Promise<void> }>((resolve, reject) => {
    const req = http.get(`${s.url}/v1/mcp/sse`, { headers: bearer(key), agent: false }, (res) => {
      const events: string[] = [];
      const ended = new Promise<void>((done) => res.on('end', done).on('close', done));
      res.on('data', (d: Buffer) => {
        events.push(d.toString());
        if (events.length === 1) resolve({ events, ended });
      });
    });
    req.on('error', reject);
  });
  t.match(events[0], /^event: endpoint\ndata: \/v1\/mcp\/messages\?sessionId=[0-9a-f-]{36}\n\n/);
  await s.service.stop();
  await ended;
  t.pass('the stream ended with the shutdown');
});
