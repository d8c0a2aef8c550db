// The developer view of a conversation: what REST, MCP and the live socket's memory_created event show.
import type { ConversationRecord, SegmentRecord } from '../db/conversations.js';

export function segmentView(s: SegmentRecord): Record<string, unknown> {
  return { text: s.text, start: s.start, end: s.end, id: s.id, speaker_id: s.speakerId, speaker_name: s.isUser ? 'User' : `Speaker ${s.speakerId ?? 0}` };
}

/** The developer view of a conversation, the shape every conversation route answers with. */
export function conversationView(c: ConversationRecord): Record<string, unknown> {
  return {
    id: c.id,
    created_at: c.createdAt,
    started_at: c.startedAt,
    finished_at: c.finishedAt,
    structured: { title: c.title, overview: c.overview, emoji: c.emoji, category: c.category, action_items: c.actionItems, events: c.events },
    folder_id: c.folderId,
    folder_name: c.folderName,
    geolocation: c.geolocation,
    language: c.language,
    source: c.source,
    transcript_segments: c.segments ? c.segments.map(segmentView) : null,
  };
}

