// What the parts of a node share: the store's repositories, Redis, the processor and the clock; built by engine/app.ts.
import type client from 'prom-client';
import type { RedisClient } from './redis.js';
import type { Config } from './config.js';
import type { Clock } from './clock.js';
import type { Logger } from './logger.js';
import type { Store } from './db/store.js';
import type { UsersRepository } from './db/users.js';
import type { ApiKeysRepository } from './db/api-keys.js';
import type { ConversationsRepository } from './db/conversations.js';
import type { FoldersRepository } from './db/folders.js';
import type { MemoriesRepository } from './db/memories.js';
import type { ActionItemsRepository } from './db/action-items.js';
import type { GoalsRepository } from './db/goals.js';
import type { UsageRepository } from './db/usage.js';
import type { UsageRecorder } from './stt/usage.js';
import type { ConversationProcessor } from './processing/types.js';
import type { Authenticator } from './identity/authenticator.js';
import type { ConversationLifecycle } from './conversations/lifecycle.js';
import type { WebhookQueue } from './webhooks/queue.js';
import type { UserSettingsRepository } from './db/user-settings.js';
import type { Notifier } from './notifications/notifier.js';
import type { VoiceTranscriber } from './voice/transcriber.js';
import type { SyncBatches } from './sync/batch.js';
import type { UploadStore } from './sync/uploads.js';
import type { EmbeddingService, SilenceTrimmer } from './speakers/embedding-service.js';
import type { Voiceprints } from './db/voiceprints.js';
import type { Accounts } from './identity/accounts.js';

export interface Services {
  readonly config: Config;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: Store;
  readonly redis: RedisClient;
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
  /** Durable webhook deliveries (conversation created, day summary): enqueue, redeliver, the delivery log. */
  readonly webhookQueue: WebhookQueue;
  /** Display name, time zone, language, day summary settings and push tokens of each user. */
  readonly userSettings: UserSettingsRepository;
  /** Sends a user a notification: outbox row, stream event, push jobs. */
  readonly notifier: Notifier;
  /** Voice messages: uploads decoded, the speech gate, the engine by language, the outcome. */
  readonly voice: VoiceTranscriber;
  /** Offline sync: batches (bounds, fair use, hashes, the job queue) and resumable uploads under DATA_DIR. */
  readonly sync: { readonly batches: SyncBatches; readonly uploads: UploadStore };
  /** Speaker embeddings (built-in, or the SPEAKER_MODEL_PATH model) on a thread started by the first embedding. */
  readonly speakerEmbeddings: EmbeddingService;
  /** Cuts silence out of uploaded recordings (Silero VAD), on the embedding thread. */
  readonly silenceTrimmer: SilenceTrimmer;
  /** Speech profiles, people and their voice samples, with the audio their embeddings came from. */
  readonly voiceprints: Voiceprints;
  /** Account deletion: sessions closed on every node, the user's rows erased, keys and uploads gone. */
  readonly accounts: Accounts;
}
