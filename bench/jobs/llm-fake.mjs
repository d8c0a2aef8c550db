// The jobs bench's language model: an OpenAI-compatible chat completion after a fixed delay, since with a real model the
// queue's throughput is set by JOB_CONCURRENCY, not our CPU. Run: `node llm-fake.mjs --port P --delay-ms D`.
import http from 'node:http';
import { parseArgs } from '../lib/report.mjs';

const { options } = parseArgs(process.argv.slice(2));
const port = Number(options.port);
const delayMs = Number(options['delay-ms'] ?? 0);
if (!Number.isInteger(port) || port <= 0 || !(delayMs >= 0)) {
  process.stderr.write('usage: node llm-fake.mjs --port P [--delay-ms D]\n');
  process.exit(2);
}

let requests = 0;
let answered = 0;

/**
 * A schema-valid answer about `transcript` (the user message the service sent), in the strict JSON schema of
 * engine/processing/llm.ts, so the service stores a real structure, an action item and a memory for each conversation.
 */
function answer(/** @type {string} */ transcript) {
  const words = transcript.split(/\s+/).filter(Boolean);
  return {
    discard: false,
    title: words.slice(0, 6).join(' ') || 'Bench conversation',
    overview: `A conversation of ${words.length} words.`,
    emoji: '🧪',
    category: 'work',
    action_items: [{ description: `Follow up on: ${words.slice(0, 8).join(' ')}`, due_at: null }],
    events: [],
    memories: [{ content: `Talked about ${words.slice(0, 5).join(' ')}`, category: 'work' }],
  };
}

/**
 * A schema-valid day summary (engine/summaries/generate.ts) naming the conversations the service listed.
 * @param {string} prompt
 */
function daySummary(prompt) {
  const ids = [...prompt.matchAll(/conversation_id: (\S+)/g)].map((m) => /** @type {string} */ (m[1]));
  const first = ids[0] ?? 'none';
  return {
    headline: 'A bench day',
    overview: `A day of ${ids.length} conversations.`,
    day_emoji: '🧪',
    highlights: ids.slice(0, 5).map((id) => ({ topic: 'Bench', emoji: '🧪', summary: 'A conversation.', conversation_ids: [id] })),
    unresolved_questions: [],
    decisions_made: ids.length > 0 ? [{ decision: 'Keep benching', conversation_id: first }] : [],
    knowledge_nuggets: [],
  };
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ requests, answered }));
    return;
  }
  if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error', code: null } }));
    return;
  }
  requests++;
  /** @type {Buffer[]} */
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    /** @type {any} */
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'body is not JSON', type: 'invalid_request_error', code: null } }));
      return;
    }
    const messages = Array.isArray(body?.messages) ? body.messages : [];
    const user = messages.filter((/** @type {any} */ m) => m?.role === 'user').map((/** @type {any} */ m) => String(m.content)).join('\n');
    const content = JSON.stringify(body?.response_format?.json_schema?.name === 'day_summary' ? daySummary(user) : answer(user));
    setTimeout(() => {
      answered++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `chatcmpl-bench-${answered}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: String(body.model ?? 'bench'),
          choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: 'stop' }],
          usage: { prompt_tokens: Math.ceil(user.length / 4), completion_tokens: Math.ceil(content.length / 4), total_tokens: Math.ceil((user.length + content.length) / 4) },
        }),
      );
    }, delayMs);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`listening ${port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
