// Records derived from a processed conversation: its memories and action items, linked by conversation_id.
import type { ProcessResult } from '../processing/types.js';
import type { Services } from '../services.js';

/** What deriving needs of the services. */
export type DerivedServices = Pick<Services, 'clock' | 'logger' | 'memories' | 'actionItems'>;

/**
 * What happens once a conversation is processed and stored: its memories and its action items become standalone
 * records linked by conversation_id (the structure itself is already on the conversation). Idempotent: a second run
 * replaces what the first derived. The live engine's processing job calls this too.
 */
export async function afterProcessed(s: DerivedServices, uid: string, conversationId: string, result: ProcessResult): Promise<void> {
  const now = s.clock.now();
  // A discarded conversation derives nothing; writing empty lists also clears what an earlier run derived.
  const memories = result.discarded ? [] : result.memories;
  const items = result.discarded ? [] : result.structured.actionItems.map((a) => ({ description: a.description, dueAt: a.dueAt }));
  await s.memories.createFromConversation(uid, conversationId, memories, now);
  await s.actionItems.createFromConversation(uid, conversationId, items, now);
  s.logger.debug(
    { conversationId, memories: result.memories.length, actionItems: result.structured.actionItems.length, producedBy: result.producedBy, uid },
    'conversation processed',
  );
}

