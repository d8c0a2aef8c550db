// Routes of the live listen path: POST /v1/conversations ends the user's in-progress conversation (docs/protocol.md).
import { Type } from '@sinclair/typebox';
import { EngineError } from '../../engine/errors.js';
import { conversationView } from '../../engine/conversations/view.js';
import type { AppRoute, Services } from './types.js';

export function listenRoutes(s: Services): AppRoute[] {
  return [
    {
      method: 'post',
      path: '/v1/conversations',
      operationId: 'endInProgressConversation',
      summary: 'End the in-progress conversation now and queue it for processing',
      description:
        'Manual end of recording: the conversation the user\'s live sessions record into (on any node), else the user\'s in-progress ' +
        'conversation, moves to `processing` and a process-conversation job is queued. Speech a live session already received is ' +
        'transcribed into it first (the answer waits for it, at most a few seconds). Live sessions receive `memory_processing_started` ' +
        'and later `memory_created`, and their next speech opens a new conversation. A conversation in which nothing was said is ' +
        'deleted instead, and answers 404 like no conversation at all.',
      tags: ['Conversations'],
      auth: { kind: 'id_token' },
      body: Type.Object({}, { title: 'EndConversation', description: 'an empty JSON object' }),
      responses: {
        200: { description: 'the conversation, now processing', schema: Type.Object({ memory: Type.Any(), messages: Type.Array(Type.Any()) }, { title: 'EndedConversation', description: 'the conversation, now processing' }) },
        404: { description: 'no live or in-progress conversation, or nothing was said in it' },
      },
      async handler({ auth }) {
        const ended = await s.lifecycle.endRecording(auth.uid);
        if (!ended || ended.outcome === 'deleted') throw new EngineError('ENG_ERR_RESOURCE_NOT_FOUND', { resource: 'Conversation' });
        return { body: { memory: { ...conversationView(ended.conversation), status: ended.conversation.status }, messages: [] } };
      },
    },
  ];
}
