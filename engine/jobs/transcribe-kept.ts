// The transcribe-kept-audio job: audio a failed provider never answered for is streamed to a usable engine and its
// segments are placed into the conversation at their conversation time; the last one lets deferred processing run.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { Scheduler } from '../scheduler.js';
import type { ConversationsRepository, SegmentInput } from '../db/conversations.js';
import { ConversationStatus } from '../protocol.js';
import { speakerIdOf } from '../audio/segment.js';
import type { EngineList } from '../stt/engine-list.js';
import { openStreams } from '../stt/failover.js';
import type { KeptAudioStore } from '../stt/kept-audio.js';
import type { SttFailure, SttSegment } from '../stt/types.js';

export interface TranscribeKeptData {
  conversationId: string;
  uid: string;
  keptId: string;
}

export interface TranscribeKeptDeps {
  conversations: ConversationsRepository;
  stt: EngineList;
  kept: KeptAudioStore;
  scheduler: Scheduler;
  logger: Logger;
  now: () => number;
  /** Enqueues processing of a conversation whose processing waited for its kept audio. */
  process: (conversationId: string, uid: string) => Promise<void>;
  /** Marks a recording done; answers how many of the conversation's recordings still wait (on any node). */
  done: (conversationId: string, keptId: string) => Promise<number>;
}

export type TranscribeKeptOutcome = 'transcribed' | 'gone';

/** Audio is streamed in 250 ms messages, faster than real time (both providers accept it). */
const CHUNK_SAMPLES = 4000;

export class NoUsableEngineError extends Error {
  constructor(readonly failure: SttFailure) {
    super(`no speech engine could transcribe kept audio: ${failure.reason}`);
    this.name = 'NoUsableEngineError';
  }
}

/**
 * Streams 16 kHz mono PCM through the first engine of the list that opens for `language`, faster than real time;
 * throws (the caller's job retries later) when none does or the stream fails. Kept audio and offline sync share it.
 */
export async function transcribePcm(
  d: { stt: EngineList; scheduler: Scheduler },
  pcm: Int16Array,
  language: string,
  sessionId: string,
  signal: AbortSignal,
): Promise<{ segments: SttSegment[]; provider: string }> {
  const r = await openStreams({
    engines: d.stt.candidates(language, null),
    channels: 1,
    stream: { language, sampleRateHz: 16000, sessionId },
    scheduler: d.scheduler,
    signal,
  });
  if (!r.ok) throw r.cancelled ? new Error('cancelled') : new NoUsableEngineError(r.failure);
  const [stream] = r.streams;
  const segments: SttSegment[] = [];
  let failure: SttFailure | undefined;
  stream!.on('segments', (s) => segments.push(...s));
  stream!.on('failure', (f) => (failure ??= f));
  try {
    for (let i = 0; i < pcm.length && !failure; i += CHUNK_SAMPLES) stream!.write(pcm.subarray(i, i + CHUNK_SAMPLES));
    if (!failure) await stream!.finalize();
  } finally {
    await stream!.close().catch(() => undefined);
  }
  if (failure) throw new NoUsableEngineError(failure);
  return { segments, provider: stream!.provider };
}

export async function transcribeKept(d: TranscribeKeptDeps, data: TranscribeKeptData, signal: AbortSignal = new AbortController().signal): Promise<TranscribeKeptOutcome> {
  const k = await d.kept.load(data.keptId);
  if (!k) {
    await d.done(data.conversationId, data.keptId);
    return 'gone';
  }
  const c = await d.conversations.getById(k.meta.conversationId);
  if (!c) {
    await d.kept.remove(k.id);
    await d.done(data.conversationId, data.keptId);
    return 'gone';
  }
  const { segments, provider } = await transcribePcm(d, k.pcm, k.meta.language, `kept-${k.meta.sessionId}`, signal);
  const call = k.meta.channels === 2;
  const placed: SegmentInput[] = segments
    .filter((s) => s.text.trim() !== '')
    .map((s) => {
      const speaker = call ? (k.meta.channel === 0 ? 'SPEAKER_00' : 'SPEAKER_01') : s.speaker || 'SPEAKER_00';
      const start = Math.max(0, round3(s.start + k.meta.offsetS));
      return { id: randomUUID(), text: s.text, speaker, speakerId: speakerIdOf(speaker), isUser: call ? k.meta.channel === 0 : (s.isUser ?? false), personId: null, start, end: Math.max(start, round3(s.end + k.meta.offsetS)), sttProvider: provider, speechProfileProcessed: false };
    });
  if (placed.length > 0) {
    const stored = await d.conversations.segments(c.id);
    const all = [...stored, ...placed].sort((a, b) => a.start - b.start || a.end - b.end);
    const first = all.findIndex((s, i) => s !== stored[i]);
    await d.conversations.replaceSegmentsFrom(c.id, first, all.slice(first), d.now());
  }
  await d.kept.remove(k.id);
  d.logger.info({ conversationId: c.id, segments: placed.length, provider, audioS: Math.round(k.pcm.length / 16) / 1000 }, 'kept audio transcribed');
  if ((await d.done(c.id, k.id)) === 0) {
    const now = await d.conversations.getById(c.id);
    if (now?.status === ConversationStatus.PROCESSING) await d.process(c.id, k.meta.uid);
  }
  return 'transcribed';
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}
