// A local fake of the OpenAI chat-completions endpoint, scriptable per request: good JSON, broken JSON, 5xx, 429, an
// answer held back, or an answer computed from the request (a fake model).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Script =
  | { kind: 'answer'; content: unknown }
  | { kind: 'raw'; content: string }
  /** Answers what `answer` returns for the request body, as JSON content. */
  | { kind: 'compute'; answer: (body: any) => unknown }
  | { kind: 'status'; status: number; headers?: Record<string, string> }
  /** Never answers until the client gives up or the server closes. */
  | { kind: 'hold' }
  /** Answers `content` once `until` settles (the test does something while the model "thinks"). */
  | { kind: 'later'; until: Promise<unknown>; content: unknown };

export interface RecordedRequest {
  authorization: string | undefined;
  body: any;
}

export interface FakeOpenAI {
  /** Base URL to give the client, ending in /v1. */
  readonly baseUrl: string;
  readonly requests: RecordedRequest[];
  /** Queues answers for the next requests; once the queue is empty, `fallback` answers. */
  script(...steps: Script[]): void;
  fallback: Script;
  close(): Promise<void>;
}

function error(res: http.ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error: { message, type: status === 429 ? 'rate_limit_exceeded' : 'invalid_request_error', code: null } }));
}

/** Checks the body the way the real endpoint would: model, messages and response_format are required in this service's requests. */
function bodyProblem(body: any): string | undefined {
  if (!body || typeof body !== 'object') return 'body must be a JSON object';
  if (typeof body.model !== 'string' || body.model === '') return 'model is required';
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages must be a non-empty array';
  for (const m of body.messages) {
    if (!m || !['system', 'user', 'assistant', 'developer'].includes(m.role) || typeof m.content !== 'string') return 'each message needs a role and string content';
  }
  const rf = body.response_format;
  if (!rf || rf.type !== 'json_schema' || typeof rf.json_schema?.name !== 'string' || typeof rf.json_schema?.schema !== 'object') return 'response_format json_schema is required';
  return undefined;
}

export async function startFakeOpenAI(opts: { apiKey?: string } = {}): Promise<FakeOpenAI> {
  const queue: Script[] = [];
  const requests: RecordedRequest[] = [];
  const held = new Set<http.ServerResponse>();
  let counter = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return error(res, 404, 'not found');
      if (opts.apiKey !== undefined && req.headers.authorization !== `Bearer ${opts.apiKey}`) return error(res, 401, 'Incorrect API key provided');
      let body: any;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return error(res, 400, 'We could not parse the JSON body of your request.');
      }
      requests.push({ authorization: req.headers.authorization, body });
      const problem = bodyProblem(body);
      if (problem) return error(res, 400, problem);
      const step = queue.shift() ?? fake.fallback;
      switch (step.kind) {
        case 'status':
          return error(res, step.status, `scripted ${step.status}`, step.headers);
        case 'hold':
          held.add(res);
          res.on('close', () => held.delete(res));
          return;
        case 'later':
          void step.until.finally(() => {
            if (!res.destroyed) answer(res, body.model, JSON.stringify(step.content));
          });
          return;
        case 'answer':
        case 'raw':
        case 'compute':
          return answer(res, body.model, step.kind === 'raw' ? step.content : JSON.stringify(step.kind === 'compute' ? step.answer(body) : step.content));
      }
    });
  });
  /** A chat completion of `model` whose message is `content`. */
  function answer(res: http.ServerResponse, model: unknown, content: string): void {
    counter++;
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${counter}` });
    res.end(
      JSON.stringify({
        id: `chatcmpl-fake${counter}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
        system_fingerprint: 'fp_fake',
      }),
    );
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const fake: FakeOpenAI = {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    fallback: { kind: 'status', status: 500 },
    script: (...steps) => queue.push(...steps),
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
