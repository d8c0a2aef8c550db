// Every live session actor of this node: admission limits, lookup by user, conversation events, and drain on shutdown.
import type { Logger } from '../logger.js';
import type { ConversationsRepository } from '../db/conversations.js';
import { CloseCode } from '../protocol.js';
import type { EndAnswer, SessionEvent } from '../jobs/session-events.js';
import { conversationView } from '../conversations/view.js';
import type { SessionActor } from './session-actor.js';

export interface ActorRegistryOptions {
  /** Sessions this node holds at most (MAX_SESSIONS). */
  maxSessions: number;
  /** Sessions one user holds at most on this node (MAX_SESSIONS_PER_USER). */
  maxSessionsPerUser: number;
  /**
   * True while this node is past what it can serve in time (live audio waits too long on decoding,
   * engine/codec/overload.ts, or transcript writes on the store): new sessions are refused with 1013. Absent: never.
   */
  overloaded?: () => boolean;
  /** Told of each session refused because the node was overloaded (a metric). */
  onShed?: () => void;
  conversations: ConversationsRepository;
  logger: Logger;
}

export type Admission = { ok: true } | { ok: false; code: number; reason: string };

export class ActorRegistry {
  readonly #o: ActorRegistryOptions;
  readonly #actors = new Set<SessionActor>();
  readonly #byUser = new Map<string, Set<SessionActor>>();
  /** Events are delivered in order: each waits for the previous one's conversation load. */
  #events: Promise<void> = Promise.resolve();
  #accepting = true;

  constructor(opts: ActorRegistryOptions) {
    this.#o = opts;
  }

  get size(): number {
    return this.#actors.size;
  }

  /** Sessions whose client left and that are still finishing their audio (decode, finalize, persist). */
  get draining(): number {
    let n = 0;
    for (const a of this.#actors) if (a.clientGone) n++;
    return n;
  }

  get accepting(): boolean {
    return this.#accepting;
  }

  /** Whether a new session of `uid` may open now. */
  admit(uid: string): Admission {
    // 1013, not 1001: the device should retry (another node takes it), not treat the refusal as final.
    if (!this.#accepting) return { ok: false, code: CloseCode.TRY_AGAIN_LATER, reason: 'server shutting down' };
    if (this.#actors.size >= this.#o.maxSessions) return { ok: false, code: CloseCode.TRY_AGAIN_LATER, reason: 'try again later' };
    if (this.#o.overloaded?.()) {
      this.#o.onShed?.();
      return { ok: false, code: CloseCode.TRY_AGAIN_LATER, reason: 'server busy, try again later' };
    }
    // A session whose client already left still drains (decode, finalize, persist) but no longer counts against its
    // user: a device that drops and reconnects at once is not refused while its last session finishes.
    let connected = 0;
    for (const a of this.#byUser.get(uid) ?? []) if (!a.clientGone) connected++;
    if (connected >= this.#o.maxSessionsPerUser) {
      return { ok: false, code: CloseCode.TRY_AGAIN_LATER, reason: 'too many sessions for this user' };
    }
    return { ok: true };
  }

  add(actor: SessionActor): void {
    this.#actors.add(actor);
    let set = this.#byUser.get(actor.uid);
    if (!set) this.#byUser.set(actor.uid, (set = new Set()));
    set.add(actor);
  }

  remove(actor: SessionActor): void {
    this.#actors.delete(actor);
    const set = this.#byUser.get(actor.uid);
    set?.delete(actor);
    if (set?.size === 0) this.#byUser.delete(actor.uid);
  }

  sessionsOf(uid: string): SessionActor[] {
    return [...(this.#byUser.get(uid) ?? [])];
  }

  /** Delivers a conversation event (from any node, via Redis) to this node's sessions of the user. */
  deliver(event: SessionEvent): Promise<void> {
    this.#events = this.#events.then(() => this.#deliver(event)).catch(() => undefined);
    return this.#events;
  }

  async #deliver(event: SessionEvent): Promise<void> {
    const actors = this.sessionsOf(event.uid);
    if (actors.length === 0) return;
    const c = await this.#o.conversations.get(event.uid, event.conversationId, { includeSegments: true });
    if (!c) return;
    const memory = { ...conversationView(c), status: c.status, discarded: c.discarded };
    // memory_created carries the installed apps' replies to the conversation-created webhook, as the compatible system's messages.
    const messages = c.appsResults.map((r) => ({ id: `${c.id}:${r.app_id}`, text: r.content, sender: 'ai', app_id: r.app_id, type: 'text' }));
    for (const a of actors) a.conversationEvent(event.type, event.conversationId, memory, messages);
  }

  /** Manual end of recording: each of this node's sessions of `uid` ends the conversation it records into. */
  async endRecording(uid: string): Promise<EndAnswer> {
    const actors = this.sessionsOf(uid);
    const ended = await Promise.all(actors.map((a) => a.endRecording().catch(() => undefined)));
    return { sessions: actors.length, ended: ended.filter((e) => e !== undefined) };
  }

  /** Closes each of this node's sessions of `uid` with `code` once it has finished its audio (the account goes). */
  async closeUser(uid: string, code: number, reason: string): Promise<EndAnswer> {
    const actors = this.sessionsOf(uid);
    await Promise.allSettled(actors.map((a) => a.drain(code, reason)));
    return { sessions: actors.length, ended: [] };
  }

  /** Refuses every new session from now on (1013); the live ones go on until drainAll(). */
  stopAdmitting(): void {
    this.#accepting = false;
  }

  /** Stops admitting and drains every session (finalise, flush, close with `code`). */
  async drainAll(code: number, reason: string): Promise<void> {
    this.#accepting = false;
    await Promise.allSettled([...this.#actors].map((a) => a.drain(code, reason)));
  }
}
