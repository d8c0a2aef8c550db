// API key lifecycle: list, create, revoke; signed-in ID token only, never a developer key.
import { Type } from '@sinclair/typebox';
import { EngineError, valueError } from '../../engine/errors.js';
import { DEFAULT_SCOPES, SCOPES, type KeyKind, type Scope } from '../../engine/protocol.js';
import { generateKey } from '../../engine/identity/key-format.js';
import type { ApiKeyRecord } from '../../engine/db/api-keys.js';
import type { AppRoute, Services } from './types.js';
import { StringEnum } from './common.js';

/** Longest key name accepted, in characters (our bound; the public API names none). */
export const MAX_KEY_NAME_CHARS = 200;

export const ApiKeySchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  key_prefix: Type.String({ description: 'first characters of the key, for recognising it; never enough to use it' }),
  key_type: StringEnum(['dev', 'mcp'], { description: 'dev: developer REST (svc_dev_); mcp: the MCP endpoint only (svc_mcp_)' }),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'updated at most once a minute per key' }),
  scopes: Type.Array(Type.String()),
}, { title: 'ApiKey', description: 'an API key, without its secret' });

export const CreatedApiKeySchema = Type.Intersect([ApiKeySchema, Type.Object({ key: Type.String({ description: 'the full secret; shown only in this response' }) })], { title: 'CreatedApiKey', description: 'a new API key with its secret' });

const CreateKeyBody = Type.Object({
  name: Type.String({ maxLength: MAX_KEY_NAME_CHARS, description: 'descriptive name; must not be blank' }),
  scopes: Type.Optional(
    Type.Union([Type.Array(Type.String(), { minItems: 1, maxItems: SCOPES.length * 2 }), Type.Null()], {
      description: 'omitted or null: the four read scopes for a dev key, every scope for an mcp key',
    }),
  ),
  key_type: Type.Optional(StringEnum(['dev', 'mcp'], { default: 'dev' })),
}, { title: 'CreateApiKey', description: 'a new API key' });

function view(r: ApiKeyRecord): Record<string, unknown> {
  return { id: r.id, name: r.name, key_prefix: r.keyPrefix, key_type: r.kind, created_at: r.createdAt, last_used_at: r.lastUsedAt, scopes: r.scopes };
}

/** Python-style list, as the compatible system prints it in this message. */
const pyList = (xs: readonly string[]): string => `[${xs.map((x) => `'${x}'`).join(', ')}]`;

export function keyRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'get',
      path: '/v1/dev/keys',
      operationId: 'listApiKeys',
      summary: 'List your API keys (newest first); secrets are never shown again',
      tags: ['API keys'],
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the keys', schema: Type.Array(ApiKeySchema, { title: 'ApiKeyList', description: 'your keys, newest first' }) } },
      async handler({ auth }) {
        return { body: (await s.apiKeys.listForUser(auth.uid)).map(view) };
      },
    },
    {
      method: 'post',
      path: '/v1/dev/keys',
      operationId: 'createApiKey',
      summary: 'Create an API key; the response is the only time the full key is shown',
      tags: ['API keys'],
      auth: { kind: 'id_token' },
      body: CreateKeyBody,
      responses: { 200: { description: 'the new key, with its secret', schema: CreatedApiKeySchema } },
      async handler({ auth, body }) {
        const name = (body.name as string).trim();
        if (name.length === 0) throw valueError(['body', 'name'], 'Key name cannot be empty');
        const kind = (body.key_type ?? 'dev') as KeyKind;
        // MCP keys are full-access by default, as the compatible system's are; the answer's `scopes` says what was given.
        const requested = (body.scopes as string[] | null | undefined) ?? (kind === 'mcp' ? SCOPES : DEFAULT_SCOPES);
        const unknown = requested.filter((x) => !(SCOPES as readonly string[]).includes(x));
        if (unknown.length > 0) throw new EngineError('ENG_ERR_KEY_SCOPE_UNKNOWN', { available: pyList(SCOPES) });
        // Stored in the canonical order, without duplicates.
        const scopes = SCOPES.filter((x) => requested.includes(x)) as Scope[];
        const now = s.clock.now();
        await s.users.ensure(auth.uid, now, s.config.memoryAccessDefault === 'enabled');
        const secret = generateKey(kind);
        const record = await s.apiKeys.create({ userId: auth.uid, kind, name, hash: secret.hash, prefix: secret.prefix, scopes, now });
        s.logger.info({ keyId: record.id, kind }, 'api key created');
        return { body: { ...view(record), key: secret.key } };
      },
    },
    {
      method: 'delete',
      path: '/v1/dev/keys/{key_id}',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key, permanently and at once on every node',
      description: 'Answers 404 for an id that is not one of your keys (whether or not it exists).',
      tags: ['API keys'],
      auth: { kind: 'id_token' },
      responses: { 204: { description: 'revoked' }, 404: { description: 'no such key of yours' } },
      async handler({ auth, params }) {
        const hash = await s.apiKeys.revoke(auth.uid, params.key_id!);
        if (!hash) throw new EngineError('ENG_ERR_KEY_NOT_FOUND');
        await s.authenticator.revoked(hash);
        s.logger.info({ keyId: params.key_id }, 'api key revoked');
        return { status: 204 };
      },
    },
  ];
}
