// What route modules receive: the services they may call. Handlers never build SQL or touch sockets.
import type client from 'prom-client';
import type { Redis } from 'ioredis';
import type { Config } from '../../engine/config.js';
import type { Clock } from '../../engine/clock.js';
import type { Logger } from '../../engine/logger.js';
import type { Store } from '../../engine/db/store.js';
import type { UsersRepository } from '../../engine/db/users.js';
import type { ApiKeysRepository } from '../../engine/db/api-keys.js';
import type { ConversationsRepository } from '../../engine/db/conversations.js';
import type { FoldersRepository } from '../../engine/db/folders.js';
import type { MemoriesRepository } from '../../engine/db/memories.js';
import type { ActionItemsRepository } from '../../engine/db/action-items.js';
import type { GoalsRepository } from '../../engine/db/goals.js';
import type { UsageRepository } from '../../engine/db/usage.js';
import type { UsageRecorder } from '../../engine/stt/usage.js';
import type { ConversationProcessor } from '../../engine/processing/types.js';
import type { Authenticator, Principal } from '../../engine/identity/authenticator.js';
import type { ConversationLifecycle } from '../../engine/conversations/lifecycle.js';
import type { Route } from '../adapter.js';

export interface Services {
  readonly config: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: Store;
  readonly redis: Redis;
  readonly registry: client.Registry;
  readonly users: UsersRepository;
  readonly apiKeys: ApiKeysRepository;
  readonly authenticator: Authenticator;
  readonly conversations: ConversationsRepository;
  readonly folders: FoldersRepository;
  /** Turns a transcript into a discard decision, structure and memories (built-in or LLM). */
  readonly processor: ConversationProcessor;
  readonly memories: MemoriesRepository;
  readonly actionItems: ActionItemsRepository;
  readonly goals: GoalsRepository;
  /** Live conversations: open, resume, end (process or delete). */
  readonly lifecycle: ConversationLifecycle;
  /** Speech-to-text usage per user, day and provider (reads). */
  readonly usage: UsageRepository;
  /** Records usage as sessions end: metrics at once, the store in batches. */
  readonly usageRecorder: UsageRecorder;
}

export type AppRoute = Route<Principal>;
