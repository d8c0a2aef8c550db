// The MCP server proper: the SDK server with the user's data as tools, the legacy SSE transport over one streamed
// answer, and the SDK's Streamable HTTP transport (web-standard Request/Response, bridged in http/mcp.ts).
// Loaded on the first MCP connection (http/mcp.ts), so a deployment without assistants does not carry the SDK and zod.
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, ListToolsRequestSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export { JSONRPCMessageSchema, WebStandardStreamableHTTPServerTransport };
import { z } from 'zod';
import { EngineError, isEngineError } from '../engine/errors.js';
import type { Principal } from '../engine/identity/authenticator.js';
import type { Scope } from '../engine/protocol.js';
import { MEMORY_CATEGORIES } from '../engine/processing/types.js';
import type { StreamSink } from './adapter.js';
import { checkMemoryAccess, view as memoryView } from './routes/memories.js';
import { view as actionItemView } from './routes/action-items.js';
import { view as goalView } from './routes/goals.js';
import { conversationView } from '../engine/conversations/view.js';
import type { Services } from './routes/types.js';

/** SSE comment sent this often so proxies keep an idle stream open, in milliseconds. */
const KEEPALIVE_MS = 25_000;
/** Largest page a tool returns. */
const MAX_TOOL_LIMIT = 100;

/** The SDK's Transport over one of our streamed answers; messages from the client arrive through deliver(). */
export class SseTransport implements Transport {
  readonly sessionId = randomUUID();
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  #keepalive: NodeJS.Timeout | undefined;

  /** @param messagesPath - where the client posts its messages (the first event names it) */
  constructor(private readonly sink: StreamSink, private readonly messagesPath: string) {
    sink.onClose(() => {
      clearInterval(this.#keepalive);
      this.onclose?.();
    });
  }

  async start(): Promise<void> {
    // The client may have left before the stream began: nothing to keep alive.
    if (this.sink.closed) return;
    this.sink.write(`event: endpoint\ndata: ${this.messagesPath}?sessionId=${this.sessionId}\n\n`);
    this.#keepalive = setInterval(() => this.sink.write(': keepalive\n\n'), KEEPALIVE_MS);
    this.#keepalive.unref();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.sink.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)) throw new Error('stream closed');
  }

  async close(): Promise<void> {
    this.sink.end();
  }

  deliver(message: JSONRPCMessage): void {
    this.onmessage?.(message);
  }
}

type ToolResult = { content: { type: 'text'; text: string }[]; isError?: boolean };

const ok = (value: unknown): ToolResult => ({ content: [{ type: 'text', text: JSON.stringify(value) }] });

/** Runs a tool body after its scope check (kept behind the listing's); known failures become tool errors the assistant can read, never crashes. */
async function guarded(principal: Principal, scope: Scope, fn: () => Promise<unknown>): Promise<ToolResult> {
  try {
    if (!principal.scopes?.includes(scope)) throw new EngineError('ENG_ERR_AUTH_SCOPE_MISSING', { scope });
    return ok(await fn());
  } catch (err) {
    if (!isEngineError(err)) throw err;
    const detail = typeof err.detail === 'string' ? err.detail : JSON.stringify(err.detail);
    return { content: [{ type: 'text', text: `${err.code}: ${detail}` }], isError: true };
  }
}

export function buildServer(s: Services, p: Principal): McpServer {
  const server = new McpServer({ name: 'wearable-backend', version: '1.0.0' });
  const uid = p.uid;
  const limit = z.number().int().min(1).max(MAX_TOOL_LIMIT).optional();
  // A key lists only the tools its scopes let it call: an assistant never plans with a tool that would fail.
  let offered = 0;
  const allowed = (scope: Scope): boolean => {
    const ok = p.scopes?.includes(scope) === true;
    if (ok) offered++;
    return ok;
  };

  if (allowed('memories:read')) {
    server.registerTool(
      'search_memories',
      { description: 'Search the user\'s memories (facts, preferences) for words of a query; newest first.', inputSchema: { query: z.string().min(1).max(500), limit } },
      ({ query, limit: n }) =>
        guarded(p, 'memories:read', async () => {
          await checkMemoryAccess(s, uid);
          const words = query.toLowerCase().split(/\W+/).filter((w) => w.length > 1);
          // Memories are short and per user; scanning a bounded window keeps this simple until vector search exists.
          const all = await s.memories.list(uid, { limit: 1000, offset: 0 });
          const scored = all
            .map((m) => ({ m, score: words.filter((w) => m.content.toLowerCase().includes(w)).length }))
            .filter((x) => x.score > 0)
            .sort((a, b) => b.score - a.score);
          return scored.slice(0, n ?? 10).map((x) => memoryView(x.m));
        }),
    );
  }
  if (allowed('memories:read')) {
    server.registerTool(
      'list_memories',
      {
        description: 'List the user\'s memories, newest first, optionally filtered by category.',
        inputSchema: { limit, offset: z.number().int().min(0).optional(), categories: z.array(z.enum(MEMORY_CATEGORIES)).optional() },
      },
      ({ limit: n, offset, categories }) =>
        guarded(p, 'memories:read', async () => {
          await checkMemoryAccess(s, uid);
          return (await s.memories.list(uid, { limit: n ?? 25, offset: offset ?? 0, ...(categories ? { categories } : {}) })).map(memoryView);
        }),
    );
  }
  if (allowed('memories:write')) {
    server.registerTool(
      'create_memory',
      {
        description: 'Remember a fact about the user.',
        inputSchema: {
          content: z.string().min(1).max(500),
          category: z.enum(MEMORY_CATEGORIES).optional(),
          visibility: z.enum(['public', 'private']).optional(),
          tags: z.array(z.string().min(1).max(100)).max(50).optional(),
        },
      },
      ({ content, category, visibility, tags }) =>
        guarded(p, 'memories:write', async () => {
          await checkMemoryAccess(s, uid);
          const m = await s.memories.create(uid, { content, category: category ?? 'other', visibility: visibility ?? 'private', tags: tags ?? [] }, s.clock.now());
          return memoryView(m);
        }),
    );
  }
  if (allowed('conversations:read')) {
    server.registerTool(
      'list_conversations',
      { description: 'List the user\'s processed conversations (title, overview, category, action items, events), newest first.', inputSchema: { limit, offset: z.number().int().min(0).optional() } },
      ({ limit: n, offset }) =>
        guarded(p, 'conversations:read', async () =>
          (await s.conversations.list(uid, { limit: n ?? 25, offset: offset ?? 0, includeSegments: false })).map(conversationView),
        ),
    );
  }
  if (allowed('conversations:read')) {
    server.registerTool(
      'get_conversation',
      { description: 'Get one conversation, optionally with its transcript.', inputSchema: { conversation_id: z.string().min(1).max(100), include_transcript: z.boolean().optional() } },
      ({ conversation_id, include_transcript }) =>
        guarded(p, 'conversations:read', async () => {
          const c = await s.conversations.get(uid, conversation_id, { includeSegments: include_transcript === true });
          if (!c) throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'Conversation' });
          return conversationView(c);
        }),
    );
  }
  if (allowed('action_items:read')) {
    server.registerTool(
      'list_action_items',
      { description: 'List the user\'s action items (tasks), newest first; `completed` filters open or done ones.', inputSchema: { completed: z.boolean().optional(), limit, offset: z.number().int().min(0).optional() } },
      ({ completed, limit: n, offset }) =>
        guarded(p, 'action_items:read', async () =>
          (await s.actionItems.list(uid, { limit: n ?? 50, offset: offset ?? 0, ...(completed === undefined ? {} : { completed }) })).map(actionItemView),
        ),
    );
  }
  if (allowed('action_items:write')) {
    server.registerTool(
      'complete_action_item',
      { description: 'Mark an action item done (or open again with completed=false).', inputSchema: { action_item_id: z.string().min(1).max(100), completed: z.boolean().optional() } },
      ({ action_item_id, completed }) =>
        guarded(p, 'action_items:write', async () => {
          const item = await s.actionItems.update(uid, action_item_id, { completed: completed ?? true }, s.clock.now());
          if (!item) throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'Action item' });
          return actionItemView(item);
        }),
    );
  }
  if (allowed('goals:read')) {
    server.registerTool(
      'list_goals',
      { description: 'List the user\'s goals with their progress; active ones unless include_inactive.', inputSchema: { include_inactive: z.boolean().optional() } },
      ({ include_inactive }) =>
        guarded(p, 'goals:read', async () => (include_inactive ? await s.goals.listAll(uid) : await s.goals.listActive(uid, 10)).map(goalView)),
    );
  }
  if (offered === 0) {
    // The SDK declares the tools capability with the first tool; a key that may call none still answers tools/list.
    server.server.registerCapabilities({ tools: {} });
    server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [] }));
  }
  return server;
}

