// Folders: the developer list, and the signed-in user's folder management and conversation filing.
import { Type } from '@sinclair/typebox';
import { valueError } from '../../engine/errors.js';
import type { FolderRecord } from '../../engine/db/folders.js';
import { notFound, SuccessSchema, SUCCESS } from './common.js';
import { ConversationSchema, storedConversationView } from './conversations.js';
import type { AppRoute, Services } from './types.js';

/** Longest folder name, in characters (our bound; the public API names none). */
export const MAX_FOLDER_NAME_CHARS = 100;

export const FolderSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  conversation_count: Type.Integer({ minimum: 0, description: 'conversations filed in the folder (deleted ones excluded)' }),
}, { title: 'Folder', description: 'a folder of conversations' });

const FolderBody = Type.Object({ name: Type.String({ maxLength: MAX_FOLDER_NAME_CHARS, description: 'unique per user; must not be blank' }) }, { title: 'FolderName', description: 'the name of a new or renamed folder' });

function view(f: FolderRecord): Record<string, unknown> {
  return { id: f.id, name: f.name, created_at: f.createdAt, updated_at: f.updatedAt, conversation_count: f.conversationCount };
}

/** 404 unless `id` is one of `uid`'s folders. */
async function requireFolder(s: Services, uid: string, id: string): Promise<void> {
  if (!(await s.folders.get(uid, id))) throw notFound('Folder');
}

async function checkedName(s: Services, uid: string, raw: string, exceptId?: string): Promise<string> {
  const name = raw.trim();
  if (name.length === 0) throw valueError(['body', 'name'], 'Folder name cannot be empty');
  if (await s.folders.nameTaken(uid, name, exceptId)) throw valueError(['body', 'name'], 'A folder with this name already exists');
  return name;
}

const TAGS = ['Folders'];
const LIST_DOC = { 200: { description: 'the folders, oldest first (bare array)', schema: Type.Array(FolderSchema, { title: 'FolderList', description: 'folders, oldest first' }) } };
const FOLDER_NOT_FOUND_DOC = { description: 'no such folder of yours' };
const FILING_NOT_FOUND_DOC = { description: 'no such folder or conversation of yours' };

export function folderRoutes(s: Services): AppRoute[] {
  const list: AppRoute['handler'] = async ({ auth }) => ({ body: (await s.folders.list(auth.uid)).map(view) });
  return [
    {
      method: 'get',
      path: '/v1/dev/user/folders',
      operationId: 'listFolders',
      summary: 'List all folders',
      description: 'A bare array of {id, name, created_at, updated_at, conversation_count}, oldest first.',
      tags: TAGS,
      auth: { kind: 'api_key', scope: 'conversations:read' },
      responses: LIST_DOC,
      handler: list,
    },
    {
      method: 'get',
      path: '/v1/folders',
      operationId: 'listMyFolders',
      summary: 'List your folders (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: LIST_DOC,
      handler: list,
    },
    {
      method: 'post',
      path: '/v1/folders',
      operationId: 'createFolder',
      summary: 'Create a folder (signed-in user)',
      description: 'Names are trimmed and unique per user: a blank or taken name answers 422.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      body: FolderBody,
      responses: { 200: { description: 'the new folder', schema: FolderSchema } },
      async handler({ auth, body }) {
        const now = s.clock.now();
        await s.users.ensure(auth.uid, now, s.config.memoryAccessDefault === 'enabled');
        const name = await checkedName(s, auth.uid, body.name as string);
        return { body: view(await s.folders.create(auth.uid, name, now)) };
      },
    },
    {
      method: 'patch',
      path: '/v1/folders/{folder_id}',
      operationId: 'renameFolder',
      summary: 'Rename a folder (signed-in user)',
      tags: TAGS,
      auth: { kind: 'id_token' },
      body: FolderBody,
      responses: { 200: { description: 'the renamed folder', schema: FolderSchema }, 404: FOLDER_NOT_FOUND_DOC },
      async handler({ auth, params, body }) {
        const id = params.folder_id!;
        await requireFolder(s, auth.uid, id);
        const name = await checkedName(s, auth.uid, body.name as string, id);
        await s.folders.rename(auth.uid, id, name, s.clock.now());
        return { body: view((await s.folders.get(auth.uid, id))!) };
      },
    },
    {
      method: 'delete',
      path: '/v1/folders/{folder_id}',
      operationId: 'deleteFolder',
      summary: 'Delete a folder (signed-in user); its conversations stay, without a folder',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'deleted', schema: SuccessSchema }, 404: FOLDER_NOT_FOUND_DOC },
      async handler({ auth, params }) {
        if (!(await s.folders.delete(auth.uid, params.folder_id!, s.clock.now()))) throw notFound('Folder');
        return { body: SUCCESS };
      },
    },
    {
      method: 'put',
      path: '/v1/folders/{folder_id}/conversations/{conversation_id}',
      operationId: 'fileConversation',
      summary: 'Put a conversation into a folder (signed-in user); moves it out of any other folder',
      description: 'Idempotent. Answers the conversation with its new folder_id and folder_name.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the conversation', schema: ConversationSchema }, 404: FILING_NOT_FOUND_DOC },
      async handler({ auth, params }) {
        await requireFolder(s, auth.uid, params.folder_id!);
        if (!(await s.conversations.setFolder(auth.uid, params.conversation_id!, params.folder_id!, s.clock.now()))) throw notFound('Conversation');
        return { body: await storedConversationView(s, auth.uid, params.conversation_id!) };
      },
    },
    {
      method: 'delete',
      path: '/v1/folders/{folder_id}/conversations/{conversation_id}',
      operationId: 'unfileConversation',
      summary: 'Take a conversation out of a folder (signed-in user)',
      description: 'Answers 404 when the conversation is not in that folder.',
      tags: TAGS,
      auth: { kind: 'id_token' },
      responses: { 200: { description: 'the conversation, without a folder', schema: ConversationSchema }, 404: FILING_NOT_FOUND_DOC },
      async handler({ auth, params }) {
        const c = await s.conversations.get(auth.uid, params.conversation_id!);
        if (!c || c.folderId !== params.folder_id) throw notFound('Conversation');
        await s.conversations.setFolder(auth.uid, c.id, null, s.clock.now());
        return { body: await storedConversationView(s, auth.uid, c.id) };
      },
    },
  ];
}
