// Merging new engine segments into a conversation's stored transcript (REFERENCE §1.10, combine_segments).
// PLACEHOLDER until the full rule set lands: appends every incoming segment unchanged. Owned by the segments work.
import type { TranscriptSegment } from './segment.js';

export interface CombineResult {
  /** The whole transcript after the merge. */
  segments: TranscriptSegment[];
  /** Segments added or changed by this merge (what the client is sent). */
  updated: TranscriptSegment[];
  /** Ids of stored segments the merge emptied and removed (sent as segments_deleted). */
  removedIds: string[];
}

/** Merges `incoming` (already shifted to conversation time) into `existing`; pure, never mutates its inputs. */
export function combineSegments(existing: readonly TranscriptSegment[], incoming: readonly TranscriptSegment[]): CombineResult {
  const added = incoming.map((s) => ({ ...s }));
  return { segments: [...existing.map((s) => ({ ...s })), ...added], updated: added, removedIds: [] };
}
