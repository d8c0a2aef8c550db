// The conversation `source` values the compatible system knows, and the one a live session gets when its device names none.

/**
 * Where a conversation came from, as the compatible system enumerates it: wearables and the apps that stand in for
 * them (`phone`, `desktop`, `apple_watch`), the glasses (`openglass`), imports (`sdcard`, `external_integration`,
 * `workflow`, `screenpipe`) and other brands of recorder. `unknown` is the compatible system's own catch-all.
 */
export const CONVERSATION_SOURCES = [
  'omi',
  'friend',
  'friend_com',
  'fieldy',
  'bee',
  'plaud',
  'frame',
  'limitless',
  'apple_watch',
  'phone',
  'phone_call',
  'desktop',
  'openglass',
  'screenpipe',
  'workflow',
  'sdcard',
  'external_integration',
  'onboarding',
  'unknown',
] as const;
export type ConversationSource = (typeof CONVERSATION_SOURCES)[number];

/** A /v4/listen session without `source`: the wearable itself, as in the compatible system. */
export const DEFAULT_LIVE_SOURCE: ConversationSource = 'omi';

/** What a source this version does not know is stored as. */
export const UNKNOWN_SOURCE: ConversationSource = 'unknown';

const KNOWN = new Set<string>(CONVERSATION_SOURCES);

export function isConversationSource(value: string): value is ConversationSource {
  return KNOWN.has(value);
}
