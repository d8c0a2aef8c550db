// One live listen session: its state machine, inbound audio queue, codec and STT streams, timers and transcript loop. Never touches a socket.
// One file because the state machine's transitions are easier to check in one place; its parts live beside it.
import type { Clock } from '../clock.js';
import type { SessionSocket } from './outbox.js';
import type { Logger } from '../logger.js';
import type { Scheduler, TimerId } from '../scheduler.js';
import type { CodecPool } from '../codec/pool.js';
import { checkCodecParams, type Codec } from '../../workers/messages.js';
import { decodeFrames, decodeLostFrames } from '../codec/decode-frames.js';
import { isEngineError } from '../errors.js';
import { CloseCode, LISTEN, ListenMessage, SERVICE_STATUS_TEXT, ServiceStatus } from '../protocol.js';
import type { SttFailure, SttSegment } from '../stt/types.js';
import type { KeptAudioMeta } from '../stt/kept-audio.js';
import { SessionStt, type SessionSttMetrics } from './session-stt.js';
import { openCustomStt, type CustomSttClient } from '../stt/custom/client.js';
import type { UsageRecorder } from '../stt/usage.js';
import type { EngineList } from '../stt/engine-list.js';
import { MANUAL_END_AUDIO_WAIT_MS, type ConversationLifecycle } from '../conversations/lifecycle.js';
import type { ConversationsRepository } from '../db/conversations.js';
import type { ListenParams } from './listen-query.js';
import { BufferLoop, type RawSegment } from '../audio/buffer-loop.js';
import { SpeakerAssignments } from '../audio/speakers.js';
import { ImageAssembler } from '../audio/images.js';
import { toWire, type TranscriptSegment } from '../audio/segment.js';
import { parseClientMessage } from './client-messages.js';
import { Outbox } from './outbox.js';
import { AudioInlet } from './audio-inlet.js';
import type { LiveSessionWebhooks } from '../webhooks/live.js';
import { TRANSLATED_LANGUAGE, TRANSLATION_OFF, type LiveTranslation } from '../translation/live.js';
import type { SessionTranslation } from '../translation/session-translation.js';
import type { AudioLogOwner, LogConnection } from './durable-audio.js';
import { SpeakerIdentification, type SpeakerIdDeps } from './speaker-id.js';

/** The public real-time connection states (opening, ready, streaming, processing, closed), plus DRAINING (finalising before close). */
export const SessionState = {
  OPENING: 'opening',
  READY: 'ready',
  STREAMING: 'streaming',
  PROCESSING: 'processing',
  DRAINING: 'draining',
  CLOSED: 'closed',
} as const;
export type SessionState = (typeof SessionState)[keyof typeof SessionState];

export type { SendResult, SessionSocket } from './outbox.js';

export interface SessionActorOptions {
  sessionId: string;
  params: ListenParams;
  socket: SessionSocket;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
  codecPool: CodecPool;
  stt: EngineList;
  lifecycle: ConversationLifecycle;
  conversations: ConversationsRepository;
  /** Audio bytes received but not yet decoded before the session is closed as too slow to serve. */
  maxInboundBytes: number;
  /** Bytes queued for a client that does not read before it is closed. */
  maxOutboundBytes: number;
  /** Called once from dispose(). */
  onClosed: (actor: SessionActor) => void;
  /** Stores audio a failed provider left unanswered and schedules its transcription; without it that audio is lost. */
  keepAudio?: (meta: KeptAudioMeta, chunks: readonly Int16Array[]) => Promise<void>;
  /** CUSTOM_STT_URL: `custom_stt=enabled` sessions stream their audio there unchanged and take its segments. */
  customSttUrl?: string;
  /** Usage accounting (audio seconds and words per user, provider and day). */
  usage?: UsageRecorder;
  /** Provider health for /metrics (failed open attempts, result lag). */
  sttMetrics?: SessionSttMetrics;
  /** Told when the session's speech provider failed, with the seconds of audio kept for later transcription (metrics). */
  onProviderFailure?: (provider: string, reason: string, keptS: number) => void;
  /** Told when a transcript step's store write failed: its segments wait for the next step (metrics). */
  onFlushFailed?: () => void;
  /** Told of the segments and photos a closing session gave up when its last step failed at every try (metrics). */
  onTranscriptLost?: (items: number) => void;
  /** The user's realtime_transcript and audio_bytes webhooks: loaded at start, given each step's segments and the PCM. */
  liveWebhooks?: LiveSessionWebhooks;
  /** Translation for `language=multi` sessions; absent: no language model, translation off. */
  translation?: LiveTranslation;
  /** ack=enabled: the session's audio log (durable-audio.ts), which sees each frame first and acknowledges it. */
  audioLog?: LogConnection;
  /**
   * The voiceprint store and embedding service: with them, a mono session with `include_speech_profile` identifies
   * its speakers (./speaker-id.ts); without them it never does.
   */
  speakerId?: SpeakerIdDeps;
}

/**
 * A closing session's last transcript step is tried again after these waits (ms) while the store fails: past them
 * (7.5 s, beside sqlite's own 5 s busy wait per try) what is still unwritten is given up, logged and counted.
 */
const LAST_STEP_RETRY_MS = [500, 1000, 2000, 4000];

/** How long a closing session waits for the translation of its last segments. */
const TRANSLATION_FINISH_MS = 5_000;

export class SessionActor {
  readonly sessionId: string;
  readonly uid: string;
  readonly #o: SessionActorOptions;
  /** The options' clock, on the actor itself: each frame reads it (one object fewer to fetch). */
  readonly #clock: Clock;
  readonly #loop: BufferLoop;
  #state: SessionState = SessionState.OPENING;
  readonly #out: Outbox;
  #inlet: AudioInlet | undefined;
  #speech: SessionStt | undefined;
  #custom: CustomSttClient | undefined;
  /** Aborted on dispose: a provider connect still retrying stops. */
  readonly #abort = new AbortController();
  #timers: TimerId[] = [];
  #lastClientMessageMs: number;
  #stepping: Promise<void> | undefined;
  #draining: Promise<void> | undefined;
  /** The provider failed after the drain began: its unanswered audio is kept before the session closes. */
  #lateFailure: { f: SttFailure; provider: string } | undefined;
  #clientGone = false;
  /** A manual end in progress (endRecording()): a second request joins it. */
  #ending: Promise<{ conversationId: string; outcome: string } | undefined> | undefined;
  /** Manual ends waiting until the audio bytes received before them are decoded (#onPcm wakes them). */
  #decodeWaiters: { bytes: number; resolve: () => void }[] = [];
  /** Counters for tests and metrics. */
  readonly stats = { audioMessages: 0, audioBytes: 0, keepAlives: 0, textMessages: 0, pcmSamples: 0, uplinkedSamples: 0, malformed: 0, speakerAssignments: 0, invalidSpeakerAssignments: 0, imageChunks: 0, rejectedImageChunks: 0, imagesCompleted: 0, imagesExpired: 0, corruptFrames: 0 };
  /** speaker_assigned maps: applied to later segments in the 600 ms step. */
  readonly #speakers = new SpeakerAssignments();
  /** image_chunk reassembly; expired images are swept on the heartbeat. */
  readonly #images: ImageAssembler;
  /** Set only when the session has an audio_bytes endpoint: the PCM path's one check. */
  #livePcm: LiveSessionWebhooks | undefined;
  /** Set only for `language=multi` sessions on a node with a language model. */
  #translation: SessionTranslation | undefined;
  /** Everything accepted reached a speech engine or was kept (the audio log may then forget it). */
  #audioDone = false;
  /** Speaker identification, for mono provider sessions with include_speech_profile. */
  #ident: SpeakerIdentification | undefined;

  constructor(opts: SessionActorOptions) {
    this.#o = opts;
    this.#clock = opts.clock;
    this.sessionId = opts.sessionId;
    this.uid = opts.params.uid;
    this.#lastClientMessageMs = opts.clock.now();
    this.#images = new ImageAssembler(opts.clock);
    this.#out = new Outbox(opts.socket, opts.maxOutboundBytes, () => this.#close(CloseCode.POLICY_VIOLATION, 'client does not read its messages'));
    this.#loop = new BufferLoop({
      uid: opts.params.uid,
      sessionId: opts.sessionId,
      source: opts.params.source,
      language: opts.params.language,
      conversationTimeoutS: opts.params.conversationTimeoutS,
      speakers: this.#speakers,
      lifecycle: opts.lifecycle,
      conversations: opts.conversations,
      clock: opts.clock,
      logger: opts.logger,
    });
  }

  get state(): SessionState {
    return this.#state;
  }

  get conversationId(): string | undefined {
    return this.#loop.conversationId;
  }

  /** Speaker identification's state; undefined when the session never identifies (include_speech_profile off, two channels, custom STT). */
  get speakerIdentification(): 'loading' | 'on' | 'off' | 'closed' | undefined {
    return this.#ident?.state;
  }

  /** The session's live webhooks, when the node sends them. */
  get liveWebhooks(): LiveSessionWebhooks | undefined {
    return this.#o.liveWebhooks;
  }

  /** Opens codec and STT, resumes the conversation, sends the service_status sequence, starts the timers. */
  async start(): Promise<void> {
    const { params: p, logger } = this.#o;
    const bad = checkCodecParams({ codec: p.codec, sampleRate: p.sampleRate, channels: p.channels });
    try {
      if (bad) throw Object.assign(new Error(bad), { code: 'ENG_ERR_CODEC_UNSUPPORTED' });
      const codec = this.#o.codecPool.open({ sessionId: this.sessionId, codec: p.codec as Codec, sampleRate: p.sampleRate, channels: p.channels as 1 | 2 });
      this.#inlet = new AudioInlet({ codec, maxBytes: this.#o.maxInboundBytes, onPcm: (pcm, info) => this.#onPcm(pcm, info.corruptFrames), onUplinked: (ch, n) => this.#onUplinked(ch, n) });
      // A codec thread that died (or a decoder that could not be made) loses the batch it held: a local engine's session
      // decodes it again; otherwise say so, never silently (a remote engine's socket died too: its failure keeps it).
      codec.on('failure', (err, messages) => {
        if (this.#speech?.lost()) logger.warn({ sessionId: this.sessionId, code: err.code, messages }, 'codec failed a batch: decoding it again');
        else logger.warn({ sessionId: this.sessionId, code: err.code, messages }, 'audio lost: the codec failed a batch');
      });
      const deps = this.#o.speakerId;
      if (deps && p.includeSpeechProfile && !p.customStt && p.channels === 1) {
        this.#ident = new SpeakerIdentification({ ...deps, uid: this.uid, sessionId: this.sessionId, logger, codec, speakers: this.#speakers, loop: this.#loop, send: (text) => this.#out.send(text) });
        // In the background: `ready` never waits for the store or the embedding thread.
        void this.#ident.load();
      }
    } catch (err) {
      const reason = bad ?? (isEngineError(err) ? err.message : 'unsupported audio format');
      this.#close(CloseCode.UNSUPPORTED_DATA, reason);
      return;
    }
    try {
      if (this.#o.audioLog) {
        if (!(await this.#o.audioLog.open(this.#logOwner()))) return;
        const at = this.#o.audioLog.streamStartMs;
        if (at !== undefined) this.#loop.streamStartsAt(at);
      }
      this.#status(ServiceStatus.INITIATING);
      this.#status(ServiceStatus.IN_PROGRESS_CONVERSATIONS_PROCESSING);
      await this.#o.lifecycle.requeueProcessing(this.uid);
      await this.#loop.resume();
      // Whether the PCM must reach this thread is known before the speech side opens.
      await this.#o.liveWebhooks?.load();
      if (this.#o.liveWebhooks?.wantsPcm) this.#livePcm = this.#o.liveWebhooks;
      if (p.language === TRANSLATED_LANGUAGE && this.#o.translation) this.#translation = await this.#o.translation.open(this.uid, this.sessionId, (text) => this.#out.send(text));
      if (this.#state !== SessionState.OPENING) return;
      this.#status(ServiceStatus.STT_INITIATING);
      if (!(await this.#openStt())) return;
    } catch (err) {
      logger.error({ sessionId: this.sessionId, err: { name: (err as Error)?.name } }, 'session start failed');
      this.#close(CloseCode.INTERNAL_ERROR, 'session could not start');
      return;
    }
    if (this.#state !== SessionState.OPENING) return;
    this.#state = this.stats.audioMessages > 0 ? SessionState.STREAMING : SessionState.READY;
    this.#ready();
    const { scheduler } = this.#o;
    this.#timers.push(scheduler.every(LISTEN.heartbeatIntervalMs, () => this.#heartbeat()));
    this.#timers.push(scheduler.every(LISTEN.bufferWindowMs, () => this.#step()));
    this.#inlet?.start();
  }

  /** A binary message from the client. The bytes are lent for this call only: whatever keeps them copies them. */
  onBinary(message: Uint8Array): void {
    this.#lastClientMessageMs = this.#clock.now();
    if (message.byteLength <= LISTEN.keepAliveMaxBytes) {
      this.stats.keepAlives++;
      return;
    }
    if (this.#state === SessionState.DRAINING || this.#state === SessionState.CLOSED) return;
    const log = this.#o.audioLog;
    if (log !== undefined && !log.take(message)) return;
    this.#audio(message);
  }

  #audio(message: Uint8Array): void {
    this.#custom?.writeEncoded(message);
    if (!this.#inlet?.accept(message)) {
      this.#o.logger.warn({ sessionId: this.sessionId, pendingBytes: this.#inlet?.pendingBytes }, 'inbound audio queue full');
      this.#close(CloseCode.TRY_AGAIN_LATER, 'audio arrives faster than it can be decoded');
      return;
    }
    this.stats.audioMessages++;
    this.stats.audioBytes += message.byteLength;
    this.#loop.noteAudio();
    if (this.#state === SessionState.READY || this.#state === SessionState.PROCESSING) this.#state = SessionState.STREAMING;
  }

  /** A text message from the client: JSON events; anything else is ignored. */
  onText(text: string): void {
    this.#lastClientMessageMs = this.#clock.now();
    this.stats.textMessages++;
    if (this.#state === SessionState.CLOSED) return;
    const msg = parseClientMessage(text);
    switch (msg.kind) {
      case 'malformed':
        this.stats.malformed++;
        this.#o.logger.debug({ sessionId: this.sessionId, bytes: text.length }, 'malformed text frame ignored');
        return;
      case 'suggested_transcript': {
        if (!this.#o.params.customStt || this.#state === SessionState.DRAINING) return;
        this.#loop.noteAudio();
        this.#loop.add(msg.segments);
        if (this.#state === SessionState.READY || this.#state === SessionState.PROCESSING) this.#state = SessionState.STREAMING;
        return;
      }
      case 'speaker_assigned': {
        const r = this.#speakers.assign(msg.raw);
        if (!r.ok) {
          this.stats.invalidSpeakerAssignments++;
          // Field names only: values (person ids, names) are personal data.
          this.#o.logger.debug({ sessionId: this.sessionId, code: r.error.code, field: r.error.field }, 'speaker_assigned ignored');
          return;
        }
        this.stats.speakerAssignments++;
        if (r.message.segmentIds.length > 0) this.#loop.reassign(r.message.segmentIds);
        this.#ident?.assigned(r.message);
        return;
      }
      case 'image_chunk': {
        if (this.#state === SessionState.DRAINING) return;
        this.stats.imageChunks++;
        const r = this.#images.add(msg.raw);
        if (r.status === 'rejected') {
          this.stats.rejectedImageChunks++;
          this.#o.logger.debug({ sessionId: this.sessionId, code: r.code, field: r.field }, 'image_chunk ignored');
        } else if (r.status === 'complete') {
          this.stats.imagesCompleted++;
          this.#loop.addPhoto(r.image.bytes);
        }
        return;
      }
      case 'other':
        return;
    }
  }

  /** The socket drained: send what waited. */
  onDrain(): void {
    this.#out.drain();
  }

  /** True once the client's socket closed: the actor may still be finishing (draining) its audio. */
  get clientGone(): boolean {
    return this.#clientGone;
  }

  /** The client went away: finalise what was accepted, persist it, release everything. */
  onClientClosed(): void {
    this.#clientGone = true;
    this.#out.close();
    // Its last frames on disk now, before the drain: a resume on another node reads the log from there.
    this.#o.audioLog?.flush();
    void this.drain(CloseCode.NORMAL, 'client closed');
  }

  /** A conversation event for this user (memory_processing_started / memory_created), `memory` and `messages` already rendered. */
  conversationEvent(type: string, conversationId: string, memory: Record<string, unknown>, messages: readonly unknown[] = []): void {
    if (type === ListenMessage.MEMORY_PROCESSING_STARTED && this.#loop.conversationId === conversationId) {
      this.#loop.conversationEnded(conversationId);
      if (this.#state === SessionState.STREAMING) this.#state = SessionState.PROCESSING;
    }
    if (this.#state === SessionState.CLOSED) return;
    this.#out.send(JSON.stringify(type === ListenMessage.MEMORY_CREATED ? { type, memory, messages } : { type, memory }));
  }

  /**
   * Manual end of recording (POST /v1/conversations, from any node): the audio received so far is decoded, the speech
   * provider answers for it (finalize), its words are stepped into the current conversation, and that conversation is
   * ended; the session goes on, and its next speech opens a new conversation. The wait for the audio is bounded
   * (MANUAL_END_AUDIO_WAIT_MS): words the provider sends later land in the next conversation, never lost. A session
   * whose client left finishes its drain instead and answers undefined: its conversation is then ended from the store.
   */
  endRecording(): Promise<{ conversationId: string; outcome: string } | undefined> {
    this.#ending ??= this.#endRecording().finally(() => (this.#ending = undefined));
    return this.#ending;
  }

  async #endRecording(): Promise<{ conversationId: string; outcome: string } | undefined> {
    if (this.#state === SessionState.OPENING || this.#state === SessionState.CLOSED) return undefined;
    if (!this.#draining && !(await this.#within(this.#audioAnswered(), MANUAL_END_AUDIO_WAIT_MS))) {
      this.#o.logger.info({ sessionId: this.sessionId }, 'manual end went ahead before the provider answered; later words open the next conversation');
    }
    if (this.#draining) {
      await this.#within(this.#draining, MANUAL_END_AUDIO_WAIT_MS);
      return undefined;
    }
    if ((this.#state as SessionState) === SessionState.CLOSED) return undefined; // disposed while it waited
    while (this.#stepping) await this.#stepping;
    const run = this.#loop.endNow();
    const step = run.then(
      () => undefined,
      () => undefined,
    );
    this.#stepping = step;
    try {
      const r = await run;
      if (r.removedIds.length > 0) this.#out.send(JSON.stringify({ type: ListenMessage.SEGMENTS_DELETED, segment_ids: r.removedIds }));
      if (r.updated.length > 0) this.#sendUpdated(r.updated, r.ended?.conversationId);
      this.#ident?.afterStep(r.updated);
      if (r.ended?.outcome === 'processing' && this.#state === SessionState.STREAMING) this.#state = SessionState.PROCESSING;
      return r.ended;
    } finally {
      if (this.#stepping === step) this.#stepping = undefined;
    }
  }

  /** Resolves once every audio byte received so far is decoded and the speech engines answered for what they got. */
  async #audioAnswered(): Promise<void> {
    const bytes = this.stats.audioBytes;
    if (this.#inlet && this.#decodedBytes() < bytes) await new Promise<void>((resolve) => this.#decodeWaiters.push({ bytes, resolve }));
    await this.#speech?.finalize();
  }

  #decodedBytes(): number {
    return this.stats.audioBytes - (this.#inlet?.pendingBytes ?? 0);
  }

  /** Waits for `p`, at most `ms` on the scheduler's clock; false when the time ran out first. */
  async #within(p: Promise<unknown>, ms: number): Promise<boolean> {
    let timer: TimerId | undefined;
    const timeout = new Promise<boolean>((resolve) => (timer = this.#o.scheduler.after(ms, () => resolve(false))));
    try {
      const settled = p.then(
        () => true,
        () => true,
      );
      return await Promise.race([settled, timeout]);
    } finally {
      if (timer !== undefined) this.#o.scheduler.cancel(timer);
    }
  }

  /**
   * Graceful end: stop taking audio, decode what was accepted, finalise STT, flush the last segments to the store and
   * the client, close with `code`, leave the open conversation to the idle check, dispose. Safe to call twice.
   */
  drain(code: number, reason: string): Promise<void> {
    this.#draining ??= this.#drain(code, reason);
    return this.#draining;
  }

  async #drain(code: number, reason: string): Promise<void> {
    if (this.#state === SessionState.CLOSED) return;
    const wasOpening = this.#state === SessionState.OPENING;
    this.#state = SessionState.DRAINING;
    for (const id of this.#timers) this.#o.scheduler.cancel(id);
    this.#timers = [];
    try {
      if (!wasOpening && this.#inlet) {
        // Everything accepted is decoded and reaches STT before it is finalised.
        await this.#inlet.finish();
        await this.#speech?.finalize();
        await this.#custom?.finish();
        await this.#stepping;
        await this.#lastStep();
        if (this.#translation) await this.#within(this.#translation.finish(), TRANSLATION_FINISH_MS);
        const late = this.#lateFailure;
        if (late) await this.#keepUnanswered(late.f, late.provider);
        this.#audioDone = true;
      }
      const open = this.#loop.conversationId;
      if (open) await this.#o.lifecycle.leftInProgress(open, this.uid, this.#o.params.conversationTimeoutS);
    } catch (err) {
      this.#o.logger.error({ sessionId: this.sessionId, err: { name: (err as Error)?.name } }, 'session drain failed');
    }
    this.#close(code, reason);
  }

  /** Frees codec and STT streams, timers and queues. Idempotent; the actor holds nothing afterwards. */
  dispose(): void {
    if (this.#state === SessionState.CLOSED) return;
    this.#state = SessionState.CLOSED;
    for (const id of this.#timers) this.#o.scheduler.cancel(id);
    this.#timers = [];
    this.#inlet?.dispose();
    this.#o.liveWebhooks?.end();
    this.#ident?.close();
    for (const w of this.#decodeWaiters.splice(0)) w.resolve();
    this.#images.clear();
    this.#translation?.dispose();
    this.#abort.abort();
    this.#speech?.close();
    void this.#custom?.close();
    this.#out.close();
    this.#o.audioLog?.finished(this.#audioDone);
    this.#o.onClosed(this);
  }

  /** What the audio log may do with the session: send on its socket, hand frames on, end it. */
  #logOwner(): AudioLogOwner {
    return {
      send: (text) => this.#out.send(text),
      accept: (frame) => {
        if (this.#state !== SessionState.DRAINING && this.#state !== SessionState.CLOSED) this.#audio(frame);
      },
      close: (code, reason) => void this.drain(code, reason),
      conversationId: () => this.#loop.conversationId,
    };
  }

  #close(code: number, reason: string): void {
    this.#out.end(code, reason);
    this.dispose();
  }

  async #openStt(): Promise<boolean> {
    const p = this.#o.params;
    if (p.customStt) return this.#openCustom();
    const speech = new SessionStt({
      registry: this.#o.stt,
      language: p.language,
      sttService: p.sttService,
      channels: p.channels,
      sessionId: this.sessionId,
      scheduler: this.#o.scheduler,
      logger: this.#o.logger,
      socketsHere: this.#livePcm !== undefined,
      ...(this.#o.usage ? { usage: { recorder: this.#o.usage, uid: this.uid, now: () => this.#clock.now() } } : {}),
      codec: this.#inlet?.codec,
      decodeKept: (messages) => this.#decodeKept(messages),
      decodeLost: (messages) => decodeLostFrames(this.#o.codecPool, { sessionId: `${this.sessionId}:lost`, codec: p.codec, sampleRate: p.sampleRate }, messages),
      ...(this.#o.sttMetrics ? { metrics: this.#o.sttMetrics } : {}),
      onSegments: (segs, provider, ch) => {
        const raw = segs.map((x) => this.#raw(x, provider, ch));
        this.#loop.add(raw);
        this.#ident?.segments(raw);
      },
      onFailure: (f, provider) => {
        // A provider failing while the session drains (its client left) is kept by the drain itself, after finalize.
        if (this.#draining) this.#lateFailure ??= { f, provider };
        else this.#draining = this.#failed(f, provider);
      },
    });
    const r = await speech.open(this.#abort.signal);
    if (r === 'cancelled') return false;
    if (r !== 'ok') {
      this.#sttFailed(r.failure, r.provider);
      return false;
    }
    if (this.#state !== SessionState.OPENING) {
      speech.close();
      return false;
    }
    this.#speech = speech;
    return true;
  }

  /**
   * Decodes audio a failed provider never answered for, kept encoded, with a fresh decoder of the session's codec (one
   * channel: the channel-id bytes were taken off).
   */
  #decodeKept(messages: readonly Uint8Array[]): Promise<Int16Array> {
    const p = this.#o.params;
    return decodeFrames(this.#o.codecPool, { sessionId: `${this.sessionId}:kept`, codec: p.codec, sampleRate: p.sampleRate }, messages);
  }


  /** custom_stt=enabled: the app's suggested_transcript, plus the operator's custom transcription server if configured. */
  async #openCustom(): Promise<boolean> {
    const url = this.#o.customSttUrl;
    if (!url) return true;
    const p = this.#o.params;
    const r = await openCustomStt({ url, codec: p.codec, sampleRate: p.sampleRate, channels: p.channels, language: p.language, sessionId: this.sessionId, clock: this.#clock, scheduler: this.#o.scheduler, logger: this.#o.logger });
    if ('failure' in r) {
      this.#sttFailed(r.failure, 'custom');
      return false;
    }
    if (this.#state !== SessionState.OPENING) {
      void r.close();
      return false;
    }
    r.on('segments', (segs) => this.#loop.add(segs));
    r.on('failure', (f) => this.#sttFailed(f, r.provider));
    this.#custom = r;
    return true;
  }

  /**
   * Two-channel calls: channel 1 is the wearer (SPEAKER_00), channel 2 the remote side (SPEAKER_01).
   * `speechProfileProcessed` starts false: speaker identification sets it (with `isUser` and `personId`) through the
   * session's speaker maps once the speaker's voice was compared with the profile.
   */
  #raw(s: SttSegment, provider: string, channel: number): RawSegment {
    if (this.#o.params.channels === 2) return { ...s, speaker: channel === 0 ? 'SPEAKER_00' : 'SPEAKER_01', isUser: channel === 0, sttProvider: provider, speechProfileProcessed: false };
    return { ...s, sttProvider: provider, speechProfileProcessed: false };
  }

  #sttFailed(f: SttFailure, provider: string): void {
    if (this.#state === SessionState.CLOSED) return;
    this.#out.send(sttFailedMessage(f, provider));
    this.#close(CloseCode.INTERNAL_ERROR, LISTEN.sttFailedReason);
  }

  /**
   * A provider failed mid-session: tell the client at once, then keep what it never answered for (its unacknowledged
   * tail and everything still being decoded) under the conversation, persist the segments already received, close 1011.
   */
  async #failed(f: SttFailure, provider: string): Promise<void> {
    if (this.#state === SessionState.CLOSED) return;
    this.#state = SessionState.DRAINING;
    for (const id of this.#timers) this.#o.scheduler.cancel(id);
    this.#timers = [];
    this.#out.send(sttFailedMessage(f, provider));
    try {
      await this.#inlet?.finish();
      await this.#stepping;
      await this.#lastStep();
      await this.#keepUnanswered(f, provider);
      this.#audioDone = true;
      const open = this.#loop.conversationId;
      if (open) await this.#o.lifecycle.leftInProgress(open, this.uid, this.#o.params.conversationTimeoutS);
    } catch (err) {
      this.#o.logger.error({ sessionId: this.sessionId, err: { name: (err as Error)?.name } }, 'session close after a provider failure failed');
    }
    this.#close(CloseCode.INTERNAL_ERROR, LISTEN.sttFailedReason);
  }

  /** Keeps the audio the failed provider never answered for (decoding done), logs and counts the failure. */
  async #keepUnanswered(f: SttFailure, provider: string): Promise<void> {
    const log = this.#o.logger;
    let keptS = 0;
    try {
      keptS = (this.#o.keepAudio ? await this.#speech?.keep(() => this.#loop.anchor(), this.#o.keepAudio, { uid: this.uid, sessionId: this.sessionId, createdAtMs: this.#clock.now() }) : 0) ?? 0;
      log.warn({ sessionId: this.sessionId, provider, reason: f.reason, keptS }, keptS ? 'speech provider failed: audio kept for later transcription' : 'speech provider failed');
    } catch (err) {
      log.error({ sessionId: this.sessionId, err: { name: (err as Error)?.name } }, 'keeping audio after a provider failure failed');
    }
    this.#o.onProviderFailure?.(provider, f.reason, keptS);
  }

  #onPcm(pcm: Int16Array[], corruptFrames: number): void {
    const stats = this.stats;
    stats.corruptFrames += corruptFrames;
    for (let i = 0; i < pcm.length; i++) {
      const channel = pcm[i]!;
      stats.pcmSamples += channel.length;
      if (channel.length > 0) this.#speech?.write(i, channel);
    }
    // The first channel only (0x01, the wearer's side of a two-channel call): what a mono receiver expects.
    if (this.#livePcm !== undefined && pcm[0] !== undefined && pcm[0].length > 0) this.#livePcm.pcm(pcm[0]);
    // Per batch, and nothing to do unless a manual end waits (a length check).
    if (this.#decodeWaiters.length > 0) this.#wakeDecodeWaiters();
  }

  #wakeDecodeWaiters(): void {
    const decoded = this.#decodedBytes();
    this.#decodeWaiters = this.#decodeWaiters.filter((w) => {
      if (w.bytes > decoded) return true;
      w.resolve();
      return false;
    });
  }

  /** PCM the codec shard sent on a provider socket it holds. */
  #onUplinked(channel: number, samples: number): void {
    this.stats.pcmSamples += samples;
    this.stats.uplinkedSamples += samples;
    this.#speech?.uplinked(channel, samples);
  }

  #heartbeat(): void {
    if (this.#clock.now() - this.#lastClientMessageMs >= LISTEN.inactivityTimeoutMs) {
      void this.drain(CloseCode.GOING_AWAY, 'inactivity timeout');
      return;
    }
    const expired = this.#images.sweep().length;
    if (expired > 0) {
      this.stats.imagesExpired += expired;
      this.#o.logger.debug({ sessionId: this.sessionId, expired }, 'incomplete images expired');
    }
    this.#out.sendIfIdle(LISTEN.heartbeatText);
  }

  /** The 600 ms step; the scheduler awaits the returned promise, and a step never overlaps the previous one. */
  #step(): Promise<void> | undefined {
    if (this.#stepping || !this.#loop.hasWork()) return undefined;
    this.#stepping = this.#stepOnce().finally(() => (this.#stepping = undefined));
    return this.#stepping;
  }

  async #stepOnce(): Promise<void> {
    try {
      const r = await this.#loop.step();
      if (r.removedIds.length > 0) this.#out.send(JSON.stringify({ type: ListenMessage.SEGMENTS_DELETED, segment_ids: r.removedIds }));
      if (r.updated.length > 0) this.#sendUpdated(r.updated, r.ended?.conversationId);
      this.#ident?.afterStep(r.updated);
      if (r.ended?.outcome === 'processing' && this.#state === SessionState.STREAMING) this.#state = SessionState.PROCESSING;
    } catch (err) {
      const e = err as { name?: string; code?: string } | undefined;
      this.#o.logger.error({ sessionId: this.sessionId, err: { name: e?.name, code: e?.code }, unwritten: this.#loop.unwritten }, 'transcript step failed; the next step tries again');
      this.#o.onFlushFailed?.();
    }
  }

  /**
   * Segments new or changed in a step, to the device, to the user's realtime transcript webhooks and to translation.
   * `endedId`: the conversation the step ended (its segments are in it), else they are in the current one.
   */
  #sendUpdated(updated: TranscriptSegment[], endedId: string | undefined): void {
    this.#out.send(JSON.stringify(updated.map(toWire)));
    this.#o.liveWebhooks?.segments(updated);
    if (this.#translation) {
      const conversationId = endedId ?? this.#loop.conversationId;
      if (conversationId) this.#translation.segments(conversationId, updated);
    }
  }

  /** The closing step: tried again (LAST_STEP_RETRY_MS) while the store fails, then what is left is given up. */
  async #lastStep(): Promise<void> {
    await this.#stepOnce();
    for (const waitMs of LAST_STEP_RETRY_MS) {
      if (this.#loop.unwritten === 0 || this.#state === SessionState.CLOSED) return;
      // A timer of the actor's own: dispose() cancels it (and the drain with it).
      await new Promise<void>((resolve) => this.#timers.push(this.#o.scheduler.after(waitMs, resolve)));
      await this.#stepOnce();
    }
    const lost = this.#loop.unwritten;
    if (lost === 0) return;
    this.#o.logger.error({ sessionId: this.sessionId, lost }, 'transcript segments given up: the store failed at every try');
    this.#o.onTranscriptLost?.(lost);
  }

  /**
   * `ready` names the serving provider, and the one it stands in for when the preferred provider would not open; a
   * `language=multi` session is told whether its segments are translated, into which language, or why not.
   */
  #ready(): void {
    const s = this.#speech;
    const translation = this.#o.params.language !== TRANSLATED_LANGUAGE ? {} : { translation: this.#translation ? { enabled: true, language: this.#translation.target } : TRANSLATION_OFF };
    if (!s?.provider && !('translation' in translation)) return this.#status(ServiceStatus.READY);
    const provider = s?.provider ? { provider: s.provider } : {};
    const reason = s?.fallbackFrom ? { reason: `fallback_from_${s.fallbackFrom}` } : {};
    this.#out.send(JSON.stringify({ type: ListenMessage.SERVICE_STATUS, status: ServiceStatus.READY, ...provider, ...reason, ...translation }));
  }

  #status(status: ServiceStatus): void {
    const text = SERVICE_STATUS_TEXT[status];
    this.#out.send(JSON.stringify(text ? { type: ListenMessage.SERVICE_STATUS, status, status_text: text } : { type: ListenMessage.SERVICE_STATUS, status }));
  }
}

/** service_status stt_failed, sent before close 1011: a public message and the machine fields, never provider text. */
function sttFailedMessage(f: SttFailure, provider: string): string {
  return JSON.stringify({ type: ListenMessage.SERVICE_STATUS, status: ServiceStatus.STT_FAILED, status_text: 'Transcription service unavailable', outcome: f.outcome, provider, retryable: f.retryable, reason: f.reason });
}
