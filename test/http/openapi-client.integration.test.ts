// A client generated from the served OpenAPI document by standard tools (openapi-typescript, openapi-fetch) type-checks
// a small program, strictly, and that program works against the real server.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { startService } from '../helpers/service.js';

/** The program a developer would write against the generated types. */
const PROGRAM = `
import createClient from 'openapi-fetch';
import type { components, paths } from './api.js';

type Memory = components['schemas']['Memory'];
type Problem = components['schemas']['ValidationError'];

export async function run(baseUrl: string, key: string): Promise<Record<string, unknown>> {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${key}\` } });

  const created = await api.POST('/v1/dev/user/memories', { body: { content: 'likes green tea', category: 'interests', tags: ['drinks'] } });
  if (!created.data) throw new Error('create failed: ' + JSON.stringify(created.error));
  const memory: Memory = created.data;

  // No query parameters at all: limit and offset have defaults, so they are optional.
  const listed = await api.GET('/v1/dev/user/memories');
  const page = await api.GET('/v1/dev/user/memories', { params: { query: { limit: 1000, categories: 'interests' } } });
  const contents: string[] = (page.data ?? []).map((m) => m.content);

  const refused = await api.POST('/v1/dev/user/memories', { body: { content: '' } });
  const problems: Problem[] = refused.error && 'detail' in refused.error && Array.isArray(refused.error.detail) ? refused.error.detail : [];

  const item = await api.POST('/v1/dev/user/action-items', { body: { description: 'call the dentist', due_at: '2026-12-02T09:00:00' } });
  const done = await api.PATCH('/v1/dev/user/action-items/{action_item_id}', {
    params: { path: { action_item_id: item.data?.id ?? '' } },
    body: { completed: true },
  });

  const goal = await api.POST('/v1/dev/user/goals', { body: { title: 'Run', target_value: 5, goal_type: 'numeric' } });
  const goals = await api.GET('/v1/dev/user/goals');
  const history = await api.GET('/v1/dev/user/goals/{goal_id}/history', { params: { path: { goal_id: goal.data?.id ?? '' } } });

  const missing = await api.GET('/v1/dev/user/conversations/{conversation_id}', { params: { path: { conversation_id: 'nope' } } });
  const conversations = await api.GET('/v1/dev/user/conversations', { params: { query: { include_transcript: true } } });

  return {
    memory: memory.category,
    listed: listed.data?.length,
    contents,
    hasMore: page.response.headers.get('x-has-more'),
    problems: problems.map((p) => p.type),
    completed: done.data?.completed,
    goals: goals.data?.map((g) => g.goal_type),
    history: history.data?.length,
    missing: missing.response.status,
    missingDetail: missing.error?.detail,
    conversations: conversations.data?.length,
  };
}

export function misuse(api: ReturnType<typeof createClient<paths>>): void {
  // @ts-expect-error 'interesting' is not a memory category
  void api.POST('/v1/dev/user/memories', { body: { content: 'x', category: 'interesting' } });
  // @ts-expect-error content is required
  void api.POST('/v1/dev/user/memories', { body: { category: 'core' } });
  // @ts-expect-error goal_type is one of boolean, scale, numeric
  void api.POST('/v1/dev/user/goals', { body: { title: 'x', target_value: 1, goal_type: 'percent' } });
  // @ts-expect-error limit is a number
  void api.GET('/v1/dev/user/memories', { params: { query: { limit: 'all' } } });
}
`;

t.test('a generated client compiles and works', async (t) => {
  const s = await startService(t);
  const doc = (await s.req('/v1/dev/openapi.json')).json;

  const dir = fs.mkdtempSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '.generated-client-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { default: openapiTS, astToString } = await import('openapi-typescript');
  fs.writeFileSync(path.join(dir, 'api.d.ts'), astToString(await openapiTS(doc)));
  const source = path.join(dir, 'program.ts');
  fs.writeFileSync(source, PROGRAM);

  const program = ts.createProgram([source], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts'],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
  t.same(problems, [], 'the program type-checks against the generated types');

  const js = ts.transpileModule(PROGRAM, { compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 } }).outputText;
  fs.writeFileSync(path.join(dir, 'program.js'), js);
  const { run } = (await import(pathToFileURL(path.join(dir, 'program.js')).href)) as { run(base: string, key: string): Promise<Record<string, unknown>> };
  const key = await s.devKey('gus', ['memories:read', 'memories:write', 'action_items:read', 'action_items:write', 'goals:read', 'goals:write', 'conversations:read']);
  t.same(await run(s.url, key), {
    memory: 'interests',
    listed: 1,
    contents: ['likes green tea'],
    hasMore: 'false',
    problems: ['string_too_short'],
    completed: true,
    goals: ['numeric'],
    history: 0,
    missing: 404,
    missingDetail: 'Conversation not found',
    conversations: 0,
  });
});
