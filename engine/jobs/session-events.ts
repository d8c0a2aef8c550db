// Conversation events for live sessions over Redis pub/sub, so a job on any node reaches the user's session on this one;
// and the manual end of recording (or the closing of every session, when the account goes), asked of every node's
// sessions of a user and answered by each node.
import { randomUUID } from 'node:crypto';
import { subscribersReached, type RedisClient } from '../redis.js';

export const SessionEventType = {
  PROCESSING_STARTED: 'memory_processing_started',
  CREATED: 'memory_created',
} as const;
export type SessionEventType = (typeof SessionEventType)[keyof typeof SessionEventType];

/** Ids only: each node loads the conversation itself. */
export interface SessionEvent {
  type: SessionEventType;
  uid: string;
  conversationId: string;
  /** On memory_created: the conversation had completed before (its owner asked for it to be processed again). */
  reprocess?: boolean;
}

/** What one node's sessions of a user did when asked to end their recording. */
export interface EndAnswer {
  /** The user's sessions on that node (draining ones included). */
  sessions: number;
  /** The conversations those sessions ended, with what ending did (`processing`, `deleted`, `gone`). */
  ended: { conversationId: string; outcome: string }[];
}

const END_REQUESTED = 'end_requested';
const CLOSE_REQUESTED = 'close_requested';
const END_ANSWERED = 'end_answered';

interface EndRequestMessage {
  type: typeof END_REQUESTED;
  uid: string;
  requestId: string;
}

interface CloseRequestMessage extends Omit<EndRequestMessage, 'type'> {
  type: typeof CLOSE_REQUESTED;
}

/** What a node does with its sessions of a user when asked. */
type UserSessionsAction = (uid: string) => Promise<EndAnswer>;

interface EndAnswerMessage extends EndAnswer {
  type: typeof END_ANSWERED;
  requestId: string;
}

type Message = SessionEvent | EndRequestMessage | CloseRequestMessage | EndAnswerMessage;

export class SessionEvents {
  readonly #publisher: RedisClient;
  readonly #subscriber: RedisClient;
  readonly #channel: string;
  #listener: ((channel: string, message: string) => void) | undefined;
  /** Manual ends this node asked for, by request id: each takes the nodes' answers. */
  readonly #asked = new Map<string, (answer: EndAnswer) => void>();

  /** `subscriber` may be shared with other channels: messages are filtered by channel. */
  constructor(opts: { publisher: RedisClient; subscriber: RedisClient; channel: string }) {
    this.#publisher = opts.publisher;
    this.#subscriber = opts.subscriber;
    this.#channel = opts.channel;
  }

  /**
   * `handler` takes the conversation events; `endRecording` ends this node's sessions of a user when any node asks
   * (requestEnd()), `closeSessions` closes them (requestClose()), and the answer goes back to the asking node. Without
   * them this node answers that it has none.
   */
  async attach(handler: (event: SessionEvent) => void, endRecording?: UserSessionsAction, closeSessions?: UserSessionsAction): Promise<void> {
    this.#listener = (channel, message) => {
      if (channel !== this.#channel) return;
      let msg: Message;
      try {
        msg = JSON.parse(message) as Message;
      } catch {
        return; // a malformed event can only come from a mismatched deployment
      }
      if (msg.type === END_ANSWERED) this.#asked.get(msg.requestId)?.(msg);
      else if (msg.type === END_REQUESTED) void this.#answer(msg, endRecording);
      else if (msg.type === CLOSE_REQUESTED) void this.#answer(msg, closeSessions);
      else handler(msg);
    };
    this.#subscriber.on('message', this.#listener);
    await this.#subscriber.subscribe(this.#channel);
  }

  async publish(event: SessionEvent): Promise<void> {
    await this.#publisher.publish(this.#channel, JSON.stringify(event));
  }

  /**
   * Asks every node to end `uid`'s live recording and collects the answers: one per node listening on the channel
   * (counted at publish, on a cluster by every node), or those that came within `timeoutMs`. Empty when Redis is unreachable.
   */
  requestEnd(uid: string, timeoutMs: number): Promise<EndAnswer[]> {
    return this.#ask(END_REQUESTED, uid, timeoutMs);
  }

  /** Asks every node to close `uid`'s live sessions (each finishes its audio first) and collects the answers as requestEnd(). */
  requestClose(uid: string, timeoutMs: number): Promise<EndAnswer[]> {
    return this.#ask(CLOSE_REQUESTED, uid, timeoutMs);
  }

  async #ask(type: typeof END_REQUESTED | typeof CLOSE_REQUESTED, uid: string, timeoutMs: number): Promise<EndAnswer[]> {
    const requestId = randomUUID();
    const answers: EndAnswer[] = [];
    let expected = Infinity;
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    const timer = setTimeout(done, timeoutMs);
    this.#asked.set(requestId, (a) => {
      answers.push({ sessions: a.sessions, ended: a.ended });
      if (answers.length >= expected) done();
    });
    const request: EndRequestMessage | CloseRequestMessage = { type, uid, requestId };
    // Redis away: no node can be asked, and the caller ends what the store holds.
    this.#publisher.publish(this.#channel, JSON.stringify(request)).then((n) => subscribersReached(this.#publisher, this.#channel, n)).then(
      (receivers) => {
        expected = receivers;
        if (answers.length >= expected) done();
      },
      () => done(),
    );
    try {
      await all;
    } finally {
      clearTimeout(timer);
      this.#asked.delete(requestId);
    }
    return answers;
  }

  async #answer(req: EndRequestMessage | CloseRequestMessage, act: UserSessionsAction | undefined): Promise<void> {
    const answer = act ? await act(req.uid).catch((): EndAnswer => ({ sessions: 0, ended: [] })) : { sessions: 0, ended: [] };
    const msg: EndAnswerMessage = { type: END_ANSWERED, requestId: req.requestId, ...answer };
    await this.#publisher.publish(this.#channel, JSON.stringify(msg)).catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.#listener) this.#subscriber.off('message', this.#listener);
    // Bounded: a subscriber that lost Redis must not hold shutdown (app.ts disconnects it next).
    await Promise.race([this.#subscriber.unsubscribe(this.#channel).catch(() => undefined), new Promise((r) => setTimeout(r, 500).unref())]);
  }
}
