// The node's Prometheus metrics, defined in one place; the parts they describe hand in what each gauge reads.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import client from 'prom-client';
import { registerMallocMetrics } from '../runtime/memory-trim.js';
import { registerQueueMetrics, type NamedQueue } from '../jobs/queue-metrics.js';
import type { CodecPool } from '../codec/pool.js';
import type { LoopPacer } from '../runtime/loop-pacer.js';
import type { TranslationCounters } from '../translation/translator.js';
import type { SpeakerIdMetrics } from '../listen/speaker-id.js';

/** The service's version, from its package.json (dist/engine/node/ is three levels below it). */
function serviceVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Process-wide metrics every role exposes: Node's defaults, native memory, the depth of the queues it knows, and
 * `service_info{role,version,node}` (always 1), which dashboards join on instead of labelling every series.
 */
export function registerProcessMetrics(registry: client.Registry, queues: () => NamedQueue[], identity: { role: string; node?: string } = { role: 'all' }): void {
  client.collectDefaultMetrics({ register: registry });
  registerMallocMetrics(registry);
  registerQueueMetrics(registry, queues);
  new client.Gauge({
    name: 'service_info',
    help: 'Always 1; its labels say what this process is: ROLE, the service version, and the node (host name).',
    labelNames: ['role', 'version', 'node'],
    registers: [registry],
  }).set({ role: identity.role, version: serviceVersion(), node: identity.node ?? hostname() }, 1);
}

/** What the session gauges read. */
export interface SessionGaugeSources {
  sessions(): number;
  draining(): number;
  tailWriteBacklogMs(): number;
  tailWritesPending(): number;
  /** MAX_SESSIONS. */
  maxSessions: number;
}

/** Gauges of the live sessions and the store's transcript backlog, and the counter of refused sessions. */
export function registerSessionMetrics(registry: client.Registry, src: SessionGaugeSources): { shed: client.Counter } {
  new client.Gauge({
    name: 'store_transcript_write_backlog_seconds',
    help: 'How long the oldest live-transcript write not yet committed has waited; growing: the store falls behind the sessions (LISTEN_SHED_STORE_DELAY_MS).',
    registers: [registry],
    collect() {
      this.set(src.tailWriteBacklogMs() / 1000);
    },
  });
  new client.Gauge({
    name: 'store_transcript_writes_pending',
    help: 'Live-transcript writes submitted and not yet committed (the group commit being written and those queued behind it).',
    registers: [registry],
    collect() {
      this.set(src.tailWritesPending());
    },
  });
  new client.Gauge({
    name: 'listen_sessions',
    help: 'Live /v4/listen sessions on this node.',
    registers: [registry],
    collect() {
      this.set(src.sessions());
    },
  });
  new client.Gauge({
    name: 'listen_sessions_max',
    help: 'MAX_SESSIONS: the live sessions this node takes; one more is refused with 1013.',
    registers: [registry],
  }).set(src.maxSessions);
  new client.Gauge({
    name: 'listen_sessions_draining',
    help: 'Sessions of listen_sessions whose client left and that are still finishing their audio (not counted against the per-user limit).',
    registers: [registry],
    collect() {
      this.set(src.draining());
    },
  });
  const shed = new client.Counter({
    name: 'listen_sessions_shed_total',
    help: 'New /v4/listen sessions refused with 1013 because live audio waited on decoding for longer than LISTEN_SHED_DECODE_DELAY_MS, or transcript writes on the store for longer than LISTEN_SHED_STORE_DELAY_MS.',
    registers: [registry],
  });
  return { shed };
}

/** The listen path's counters and histograms, observed by the codec pool and the session actors. */
export interface ListenMetrics {
  readonly decodeDelay: client.Histogram<'shard'>;
  readonly sttFailures: client.Counter<'provider' | 'reason'>;
  readonly sttOpenFailures: client.Counter<'provider' | 'reason'>;
  readonly sttResultLag: client.Histogram<'provider'>;
  readonly keptSeconds: client.Counter<'provider'>;
  readonly flushFailures: client.Counter;
  readonly transcriptLost: client.Counter;
  readonly oversized: client.Counter<'kind' | 'outcome'>;
}

export function registerListenMetrics(registry: client.Registry): ListenMetrics {
  return {
    decodeDelay: new client.Histogram({
      name: 'listen_decode_delay_seconds',
      help: "Per decode task: how long its longest-waiting live audio waited, from complete for its consumer (a provider message's worth) to decoded PCM back on the main thread. The engine's own share of a frame's delay; it climbs as a node nears saturation.",
      labelNames: ['shard'],
      buckets: [0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    sttOpenFailures: new client.Counter({
      name: 'stt_open_failures_total',
      help: "Attempts to open a session's speech stream that failed, by provider and reason; the session tries again or moves to the next provider, and ends with stt_failed only when every attempt failed.",
      labelNames: ['provider', 'reason'],
      registers: [registry],
    }),
    sttResultLag: new client.Histogram({
      name: 'stt_result_lag_seconds',
      help: "Remote providers: seconds of a session's audio sent but not yet covered by the provider's final results, read as results arrive whenever a final moved that mark. How far finals trail the live audio: the provider's end-of-utterance wait plus its own delay.",
      labelNames: ['provider'],
      buckets: [0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30],
      registers: [registry],
    }),
    sttFailures: new client.Counter({
      name: 'stt_stream_failures_total',
      help: 'Live sessions whose speech provider failed mid-stream (the session ends with stt_failed), by provider and reason.',
      labelNames: ['provider', 'reason'],
      registers: [registry],
    }),
    keptSeconds: new client.Counter({
      name: 'stt_kept_audio_seconds_total',
      help: 'Seconds of audio a failed provider left unanswered, kept on disk and transcribed later instead of lost.',
      labelNames: ['provider'],
      registers: [registry],
    }),
    flushFailures: new client.Counter({
      name: 'listen_transcript_write_failures_total',
      help: "Sessions' 600 ms transcript steps whose store write failed; their segments wait for the next step.",
      registers: [registry],
    }),
    transcriptLost: new client.Counter({
      name: 'listen_transcript_items_lost_total',
      help: 'Transcript segments and photos a closing session gave up because its store writes failed at every try.',
      registers: [registry],
    }),
    oversized: new client.Counter({
      name: 'listen_oversized_messages_total',
      help: '/v4/listen client messages over 64 KiB: audio frames skipped (the session goes on), text messages that closed the session with 1009, and messages over 256 KiB refused unread with the connection dropped (kind "unknown").',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    }),
  };
}

/** Acknowledged audio (ack=enabled): how soon audio is acknowledged, gaps, full logs, hand-overs, deletions. */
export function registerAudioLogMetrics(registry: client.Registry) {
  return {
    ackLatency: new client.Histogram({
      name: 'listen_audio_ack_seconds',
      help: 'ack=enabled sessions: from the oldest frame of a write to the audio_ack that covers it (the write and fsync pass runs once a second).',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 5],
      registers: [registry],
    }),
    gapSeconds: new client.Counter({
      name: 'listen_audio_log_gap_seconds_total',
      help: 'Seconds of audio resumed sessions skipped: the client resumed past the end of what the service had received.',
      registers: [registry],
    }),
    full: new client.Counter({
      name: 'listen_audio_log_full_total',
      help: 'ack=enabled sessions closed because an audio log bound was reached, by scope (session: 4413, node: 1013).',
      labelNames: ['scope'],
      registers: [registry],
    }),
    handedOverSeconds: new client.Counter({
      name: 'listen_audio_log_handed_over_seconds_total',
      help: 'Seconds of logged audio a connection never finished (its node died) handed to kept audio for transcription.',
      registers: [registry],
    }),
    removed: new client.Counter({
      name: 'listen_audio_logs_removed_total',
      help: 'Audio logs deleted, by reason: retention (conversations processed, AUDIO_LOG_RETENTION_S passed) or conversation_gone.',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
}

/** The main thread's loop pacing: time slept between polls and whether it paces now. */
export function registerPacerMetrics(registry: client.Registry, pacer: LoopPacer): void {
  new client.Counter({
    name: 'listen_loop_paced_seconds_total',
    help: 'Time the main thread slept between polls to let frames gather; part of the event-loop delay, not of its work.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(pacer.sleptMs / 1000);
    },
  });
  new client.Gauge({
    name: 'listen_loop_paced',
    help: 'Whether the main thread polls its sockets paced now (1) or sleeps in epoll until the next event (0).',
    registers: [registry],
    collect() {
      this.set(pacer.paced ? 1 : 0);
    },
  });
}

/** The codec shards' load by thread and each shard thread's heap. */
export function registerCodecMetrics(registry: client.Registry, pool: CodecPool): void {
  new client.Gauge({
    name: 'codec_sessions',
    help: 'Open live-audio decode streams by the thread that decodes them: each codec shard (0, 1, ...) and "main" (the main thread, when it has room).',
    labelNames: ['thread'],
    registers: [registry],
    collect() {
      this.reset();
      pool.load.forEach((n, i) => this.set({ thread: String(i) }, n));
      this.set({ thread: 'main' }, pool.inlineLoad);
    },
  });
  new client.Gauge({
    name: 'codec_thread_heap_bytes',
    help: "Each codec shard thread's V8 heap, used and committed (not in nodejs_heap_size_*, which is the main thread's).",
    labelNames: ['shard', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const h of await pool.threadHeaps()) {
        this.set({ shard: String(h.shard), state: 'used' }, h.usedBytes);
        this.set({ shard: String(h.shard), state: 'committed' }, h.committedBytes);
      }
    },
  });
}

/** The live-session webhook senders (realtime transcript, audio bytes): engine/webhooks/live.ts. */
export interface LiveWebhookMetrics {
  readonly requests: client.Counter<'event' | 'outcome'>;
  readonly dropped: client.Counter<'event' | 'reason'>;
  readonly segmentsDropped: client.Counter;
  readonly audioWindowsDropped: client.Counter;
  readonly inFlight: client.Gauge<'event'>;
  readonly replies: client.Counter<'kind'>;
}

export function registerLiveWebhookMetrics(registry: client.Registry): LiveWebhookMetrics {
  return {
    requests: new client.Counter({
      name: 'webhook_live_requests_total',
      help: 'Requests of the live webhooks (realtime_transcript, audio_bytes), each attempt by its outcome: delivered, retry, gone, rejected, refused.',
      labelNames: ['event', 'outcome'],
      registers: [registry],
    }),
    dropped: new client.Counter({
      name: 'webhook_live_dropped_total',
      help: 'Live webhook batches (transcript segments) and windows (audio) given up on: retries spent, or the endpoint answered gone, rejected or was refused.',
      labelNames: ['event', 'reason'],
      registers: [registry],
    }),
    segmentsDropped: new client.Counter({
      name: 'webhook_transcript_segments_dropped_total',
      help: 'Transcript segments dropped unsent, oldest first, because an endpoint still busy had the most a session keeps for it waiting.',
      registers: [registry],
    }),
    audioWindowsDropped: new client.Counter({
      name: 'webhook_audio_windows_dropped_total',
      help: 'Audio windows dropped unsent, oldest first, because an audio_bytes endpoint still busy had the most a session keeps for it waiting.',
      registers: [registry],
    }),
    inFlight: new client.Gauge({
      name: 'webhook_live_in_flight',
      help: 'Live webhook requests on the wire now.',
      labelNames: ['event'],
      registers: [registry],
    }),
    replies: new client.Counter({
      name: 'webhook_live_replies_total',
      help: 'Replies of live transcript endpoints worth acting on, stored: a message to push or a proactive notification request; too_large ones are not stored.',
      labelNames: ['kind'],
      registers: [registry],
    }),
  };
}

/** Live translation (sessions with `language=multi`): model requests, sentences by where their answer came from, segments by outcome. */
export function registerTranslationMetrics(registry: client.Registry): TranslationCounters {
  const requests = new client.Counter({
    name: 'translation_requests_total',
    help: 'Translation requests to the language model by outcome: ok, timeout, error (refused, 5xx, connection), bad_answer (not the schema).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const sentences = new client.Counter({
    name: 'translation_sentences_total',
    help: 'Sentences of live segments to translate, by where their answer came from: the node cache or the model.',
    labelNames: ['source'],
    registers: [registry],
  });
  const segments = new client.Counter({
    name: 'translation_segments_total',
    help: 'Live segments decided: translated, same_language (no translation needed), skipped (the model failed at every try), dropped (too many waiting in the session).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  return {
    request: (outcome) => requests.inc({ outcome }),
    sentence: (source) => sentences.inc({ source }),
    segment: (outcome, n = 1) => segments.inc({ outcome }, n),
  };
}

/** Voice messages (engine/voice/transcriber.ts): outcomes per provider, the audio transcribed, the speech gate's failures. */
export interface VoiceMetrics {
  readonly outcomes: client.Counter<'provider' | 'outcome'>;
  readonly audioSeconds: client.Counter<'provider'>;
  readonly gateFailures: client.Counter;
}

export function registerVoiceMetrics(registry: client.Registry): VoiceMetrics {
  return {
    outcomes: new client.Counter({
      name: 'voice_transcriptions_total',
      help: 'Voice messages by provider (provider_a, provider_b, local, unknown when none serves the language) and outcome of the closed vocabulary.',
      labelNames: ['provider', 'outcome'],
      registers: [registry],
    }),
    audioSeconds: new client.Counter({
      name: 'voice_transcribed_audio_seconds_total',
      help: 'Seconds of voice-message audio transcribed with success, by provider.',
      labelNames: ['provider'],
      registers: [registry],
    }),
    gateFailures: new client.Counter({
      name: 'voice_speech_gate_failures_total',
      help: 'Voice messages whose speech gate (Silero VAD) could not decide; they went to the provider ungated.',
      registers: [registry],
    }),
  };
}

/** Offline sync (engine/sync/): batches by outcome, files by what became of them, the audio transcribed. */
export interface SyncMetrics {
  readonly batches: client.Counter<'outcome'>;
  readonly files: client.Counter<'status'>;
  readonly audioSeconds: client.Counter;
  readonly uploadsExpired: client.Counter;
}

export function registerSyncMetrics(registry: client.Registry): SyncMetrics {
  return {
    batches: new client.Counter({
      name: 'sync_batches_total',
      help: 'Offline sync batches by outcome: refused at POST (invalid 400, too_large 413, fair_use 429), or run to the end (completed, failed).',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    files: new client.Counter({
      name: 'sync_files_total',
      help: 'Files of finished sync batches by status: done (transcribed and placed), duplicate (synced before), failed.',
      labelNames: ['status'],
      registers: [registry],
    }),
    audioSeconds: new client.Counter({
      name: 'sync_audio_seconds_total',
      help: 'Seconds of offline audio transcribed and placed into conversations.',
      registers: [registry],
    }),
    uploadsExpired: new client.Counter({
      name: 'sync_uploads_expired_total',
      help: 'Resumable sync uploads removed after a day with no append (given up by their client).',
      registers: [registry],
    }),
  };
}

/** Rows the retention sweep deleted, by table (engine/db/retention.ts). */
export function registerRetentionMetrics(registry: client.Registry): client.Counter<'table'> {
  return new client.Counter({
    name: 'retention_deleted_total',
    help: 'Log rows deleted once past their retention (delivery log, app replies, notifications, finished sync jobs), by table.',
    labelNames: ['table'] as const,
    registers: [registry],
  });
}

/** Live speaker identification's counters (engine/listen/speaker-id.ts), as the sessions report them. */
export function registerSpeakerIdMetrics(registry: client.Registry): SpeakerIdMetrics {
  const embeddings = new client.Counter({
    name: 'listen_speaker_embeddings_total',
    help: "Clips of live speakers' voices embedded (each on the speaker-embedding thread) to compare with the user's profile and people.",
    registers: [registry],
  });
  const matches = new client.Counter({
    name: 'listen_speaker_matches_total',
    help: 'Live speakers identified: as the user (profile), as one of the user\'s people (voice), or by a name they gave (name); each sends one speaker_label_suggestion.',
    labelNames: ['kind'],
    registers: [registry],
  });
  const drops = new client.Counter({
    name: 'listen_speaker_queue_drops_total',
    help: 'Speakers not queued for an embedding because their session already had the most pending; they are tried again with their next segment.',
    registers: [registry],
  });
  const samples = new client.Counter({
    name: 'listen_speaker_samples_total',
    help: 'Voice samples added to people from live sessions after the client confirmed the speaker (speaker_assigned).',
    registers: [registry],
  });
  return {
    embedded: () => embeddings.inc(),
    matched: (kind) => matches.inc({ kind }),
    dropped: () => drops.inc(),
    sampled: () => samples.inc(),
  };
}
