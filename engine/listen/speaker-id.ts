// A live session's speaker identification (docs/speakers.md, Live identification): each new provider speaker's voice
// compared with the user's speech profile and people, names the speakers give themselves, and the clips the client
// confirms kept as voice samples. Loaded in the background; a session with nothing to compare holds no audio.
import type { Logger } from '../logger.js';
import { ListenMessage } from '../protocol.js';
import { USER_PERSON_ID, type SpeakerAssignedMessage, type SpeakerAssignments } from '../audio/speakers.js';
import type { RawSegment } from '../audio/buffer-loop.js';
import type { TranscriptSegment } from '../audio/segment.js';
import { cosineSimilarity, matchThresholds, normalise } from '../speakers/embedding.js';
import type { EmbeddingService } from '../speakers/embedding-service.js';
import type { Voiceprints } from '../db/voiceprints.js';
import { selfIntroducedName } from '../speakers/name-cues.js';
import { speakerIdOf } from '../audio/segment.js';
import { Slots } from '../runtime/slots.js';

/**
 * Seconds of a session's audio its codec shard keeps while identification is on (Opus as its packets, tens of KB;
 * other codecs as 640 KB of PCM): a clip (CLIP_MAX_S) plus the provider's and the step's delay before its segment is
 * known. A sample the client confirms later than that is taken from the speaker's next words instead.
 */
export const WINDOW_S = 20;
/** A new speaker is compared once it has this much audio in segments (the compatible system's minimum). */
export const MIN_AUDIO_S = 2;
/** Longest clip embedded at once: the speaker's latest audio, a longer segment cut to its centre. */
export const CLIP_MAX_S = 10;
/** Clips averaged into one speaker's voice at most: past them, a speaker still unmatched is left as it is. */
export const MAX_CLIPS_PER_SPEAKER = 4;
/** Speakers waiting for an embedding (or a sample) per session; one more is dropped and tried with its next segment. */
export const MAX_PENDING = 4;
/** Voice samples a session adds for the people the client confirms. */
export const MAX_SAMPLES_PER_SESSION = 5;
/** Spans of audio remembered per speaker (the latest; enough for CLIP_MAX_S of short segments). */
const MAX_SPANS = 16;
/** Segment ids remembered as already suggested; the oldest are forgotten first. */
const MAX_SUGGESTED = 1000;
/** What the owner is called in a self-match suggestion (the developer view's name for the owner). */
export const USER_PERSON_NAME = 'User';

/**
 * Clips cut and being embedded at once on a node, whatever the number of sessions: each is up to 10 s of PCM
 * (320 KB), and sessions that start together (a node's devices reconnecting) would otherwise each hold one while
 * they wait for the embedding thread. Two keep the thread busy: one embedded while the next is cut.
 */
export const CLIPS_AT_ONCE = 2;

/** What the session gives identification: the voiceprint store and the embedding service of the node. */
export interface SpeakerIdDeps {
  voiceprints: Pick<Voiceprints, 'getProfile' | 'listPeopleEmbeddings' | 'findPersonByName' | 'createPerson' | 'addPersonSample'>;
  /** The node's embedding service, asked for only when a session first needs it (it starts a thread). */
  embeddings: () => EmbeddingService;
  /** The node's clip slots (CLIPS_AT_ONCE), shared by its sessions. @defaultValue slots of this session's own */
  clipSlots?: Slots;
  metrics?: SpeakerIdMetrics;
}

/** Counters of the node (engine/node/metrics.ts). */
export interface SpeakerIdMetrics {
  embedded(): void;
  matched(kind: 'user' | 'person' | 'name'): void;
  dropped(): void;
  sampled(): void;
}

export interface SpeakerIdOptions extends SpeakerIdDeps {
  uid: string;
  sessionId: string;
  logger: Logger;
  /** The session's codec stream: its window of PCM in the shard and the clips copied out of it. */
  codec: { window(seconds: number): Promise<void>; clip(ranges: readonly number[]): Promise<Int16Array> };
  speakers: SpeakerAssignments;
  loop: { reassignSpeaker(speakerId: number): void; lastSegmentOf(speakerId: number): string | undefined; readonly conversationId: string | undefined };
  send(text: string): void;
}

interface Candidate {
  personId: string;
  name: string;
  embedding: Float32Array;
}

interface Speaker {
  /** Stream seconds [start, end) of the speaker's latest segments. */
  spans: [number, number][];
  /** Seconds of audio since the last clip was taken. */
  fresh: number;
  /** Stream second up to which the speaker's audio was embedded. */
  embeddedTo: number;
  /** Sum of the speaker's clip embeddings (their normalised mean is the speaker's voice). */
  sum: Float32Array | undefined;
  clips: number;
  queued: boolean;
  /** Matched (voice or name) or assigned by the client: no more comparisons. */
  settled: boolean;
  /** A person the client confirmed whose voice sample waits for enough audio in the window. */
  sample?: { personId: string; segmentId: string | null };
}

interface Suggestion {
  personId: string;
  name: string;
}

export class SpeakerIdentification {
  readonly #o: SpeakerIdOptions;
  #state: 'loading' | 'on' | 'off' | 'closed' = 'loading';
  #model = '';
  #profile: Float32Array | undefined;
  #people: Candidate[] = [];
  readonly #speakers = new Map<number, Speaker>();
  #queue: number[] = [];
  #busy = false;
  #samples = 0;
  readonly #pendingSuggestions = new Map<number, Suggestion>();
  readonly #suggested = new Set<string>();
  /** Names being looked up or created, per speaker (a second cue for the same speaker waits for nothing). */
  readonly #naming = new Set<number>();
  readonly #clipSlots: Slots;

  constructor(o: SpeakerIdOptions) {
    this.#o = o;
    this.#clipSlots = o.clipSlots ?? new Slots(CLIPS_AT_ONCE);
  }

  /** 'on' while the session keeps a window and compares voices; 'off' with nothing to compare (names still count). */
  get state(): 'loading' | 'on' | 'off' | 'closed' {
    return this.#state;
  }

  /** Loads the user's profile and people; with either, opens the window. Never throws (identification stays off). */
  async load(): Promise<void> {
    const { voiceprints, uid, logger, sessionId } = this.#o;
    try {
      const model = this.#o.embeddings().model;
      const [profile, people] = await Promise.all([voiceprints.getProfile(uid), voiceprints.listPeopleEmbeddings(uid)]);
      if (this.#state === 'closed') return;
      this.#model = model;
      this.#profile = profile?.model === model ? profile.embedding : undefined;
      this.#people = people.filter((p) => p.model === model).map((p) => ({ personId: p.personId, name: p.name, embedding: p.embedding }));
      if (this.#profile === undefined && this.#people.length === 0) {
        this.#state = 'off';
        return;
      }
      await this.#windowOn();
    } catch (err) {
      if (this.#state === 'loading') this.#state = 'off';
      logger.warn({ sessionId, err: { name: (err as Error)?.name } }, 'speaker identification could not load; the session goes on without it');
    }
  }

  async #windowOn(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'on';
    await this.#o.codec.window(WINDOW_S);
  }

  /** A provider's segments, in stream time: note each speaker's audio, look for names, queue comparisons. */
  segments(segments: readonly RawSegment[]): void {
    if (this.#state === 'closed') return;
    for (const s of segments) {
      if (s.text.trim() === '' || !(s.end > s.start)) continue;
      const speakerId = speakerIdOf(s.speaker || 'SPEAKER_00');
      const name = selfIntroducedName(s.text);
      if (name !== undefined) this.#named(speakerId, name);
      if (this.#state !== 'on') continue;
      const sp = this.#speaker(speakerId);
      sp.spans.push([s.start, s.end]);
      if (sp.spans.length > MAX_SPANS) sp.spans.shift();
      sp.fresh += s.end - s.start;
      if (sp.fresh >= MIN_AUDIO_S && (sp.sample !== undefined || this.#wantsVoice(speakerId, sp))) this.#enqueue(speakerId, sp);
    }
  }

  /** After a step: suggestions wait until the step has sent the segment they name. */
  afterStep(updated: readonly TranscriptSegment[]): void {
    if (this.#pendingSuggestions.size === 0) return;
    for (const [speakerId, s] of this.#pendingSuggestions) {
      let segmentId: string | undefined;
      for (let i = updated.length - 1; i >= 0 && segmentId === undefined; i--) if (updated[i]!.speakerId === speakerId) segmentId = updated[i]!.id;
      segmentId ??= this.#o.loop.lastSegmentOf(speakerId);
      if (segmentId === undefined) continue;
      this.#pendingSuggestions.delete(speakerId);
      this.#suggest(speakerId, s, segmentId);
    }
  }

  /**
   * The client assigned a speaker: it is settled, and a real person's clip becomes a voice sample (now, or once the
   * window holds enough of the speaker). A session that kept no window starts one, so the person's next words count.
   */
  assigned(m: SpeakerAssignedMessage): void {
    if (this.#state === 'closed') return;
    const sp = this.#speaker(m.speakerId);
    sp.settled = true;
    if (m.personId === USER_PERSON_ID || this.#samples >= MAX_SAMPLES_PER_SESSION) return;
    sp.sample = { personId: m.personId, segmentId: m.segmentIds.at(-1) ?? null };
    if (this.#state === 'off') {
      void this.#windowOn().catch(() => undefined);
      sp.spans = [];
      sp.fresh = 0;
      return;
    }
    if (this.#state === 'on' && this.#audioOf(sp) >= MIN_AUDIO_S) this.#enqueue(m.speakerId, sp);
  }

  close(): void {
    this.#state = 'closed';
    this.#queue = [];
    this.#speakers.clear();
    this.#pendingSuggestions.clear();
  }

  #speaker(speakerId: number): Speaker {
    let sp = this.#speakers.get(speakerId);
    if (sp === undefined) {
      sp = { spans: [], fresh: 0, embeddedTo: -Infinity, sum: undefined, clips: 0, queued: false, settled: false };
      this.#speakers.set(speakerId, sp);
    }
    return sp;
  }

  #wantsVoice(speakerId: number, sp: Speaker): boolean {
    return !sp.settled && sp.clips < MAX_CLIPS_PER_SPEAKER && this.#o.speakers.forSpeaker(speakerId) === undefined;
  }

  #audioOf(sp: Speaker): number {
    return sp.spans.reduce((n, [a, b]) => n + (b - a), 0);
  }

  #enqueue(speakerId: number, sp: Speaker): void {
    if (sp.queued) return;
    if (this.#queue.length >= MAX_PENDING) {
      this.#o.metrics?.dropped();
      return;
    }
    sp.queued = true;
    this.#queue.push(speakerId);
    this.#pump();
  }

  /** One clip at a time per session: the next starts when the last is done. */
  #pump(): void {
    if (this.#busy || this.#state !== 'on') return;
    const speakerId = this.#queue.shift();
    if (speakerId === undefined) return;
    const sp = this.#speakers.get(speakerId);
    if (sp === undefined) return this.#pump();
    sp.queued = false;
    this.#busy = true;
    this.#work(speakerId, sp)
      .catch((err: unknown) => this.#o.logger.warn({ sessionId: this.#o.sessionId, err: { name: (err as Error)?.name } }, 'speaker identification step failed'))
      .finally(() => {
        this.#busy = false;
        this.#pump();
      });
  }

  /**
   * A confirmed person's sample (the speaker's latest audio), then the speaker's audio not yet embedded as one more
   * clip. Audio that fell out of the window (or came before it opened) leaves a clip short: it waits for more speech.
   */
  async #work(speakerId: number, sp: Speaker): Promise<void> {
    sp.fresh = 0;
    if (sp.sample !== undefined) {
      const clip = await this.#o.codec.clip(clipRanges(sp.spans));
      if (clip.length >= MIN_AUDIO_S * 16000 && this.#state === 'on') await this.#addSample(sp, clip);
    }
    if (!this.#wantsVoice(speakerId, sp) || this.#state !== 'on') return;
    const service = this.#o.embeddings();
    const e = await this.#embedFresh(sp, service);
    if (e === undefined || this.#state !== 'on' || service.model !== this.#model) return;
    sp.sum ??= new Float32Array(e.length);
    if (sp.sum.length !== e.length) return;
    for (let i = 0; i < e.length; i++) sp.sum[i]! += e[i]!;
    sp.clips++;
    // The client may have assigned the speaker (or it named itself) while the clip was embedded: that stands.
    if (sp.settled || this.#o.speakers.forSpeaker(speakerId) !== undefined) return;
    this.#compare(speakerId, sp, normalise(sp.sum.slice()));
  }

  /**
   * The speaker's audio not yet embedded, cut from the window once one of the node's clip slots is free and embedded;
   * undefined when there is too little of it. Each clip is new audio: re-embedding what an earlier clip held would cost
   * CPU and tell nothing new.
   */
  async #embedFresh(sp: Speaker, service: EmbeddingService): Promise<Float32Array | undefined> {
    const slots = this.#clipSlots;
    // Taken at once when free, so a quiet node asks for the clip in the same turn.
    if (!slots.tryTake()) await slots.take();
    try {
      if (this.#state !== 'on') return undefined;
      const from = sp.embeddedTo;
      const upTo = sp.spans.at(-1)?.[1] ?? from;
      const fresh = sp.spans.filter(([, b]) => b > from).map(([a, b]): [number, number] => [Math.max(a, from), b]);
      const clip = await this.#o.codec.clip(clipRanges(fresh));
      if (clip.length < MIN_AUDIO_S * 16000 || this.#state !== 'on') return undefined;
      sp.embeddedTo = upTo;
      const e = await service.embed(clip);
      this.#o.metrics?.embedded();
      return e;
    } finally {
      slots.give();
    }
  }

  /** The speaker's voice against the profile and the people: the best must pass the threshold and beat the runner-up by the margin. */
  #compare(speakerId: number, sp: Speaker, voice: Float32Array): void {
    const scores: { who: Suggestion & { isUser: boolean }; score: number }[] = [];
    if (this.#profile !== undefined && this.#profile.length === voice.length) {
      scores.push({ who: { personId: USER_PERSON_ID, name: USER_PERSON_NAME, isUser: true }, score: cosineSimilarity(voice, this.#profile) });
    }
    for (const p of this.#people) {
      if (p.embedding.length === voice.length) scores.push({ who: { personId: p.personId, name: p.name, isUser: false }, score: cosineSimilarity(voice, p.embedding) });
    }
    scores.sort((a, b) => b.score - a.score);
    const best = scores[0];
    const { similarity, margin } = matchThresholds(this.#model);
    const matched = best !== undefined && best.score >= similarity && best.score - (scores[1]?.score ?? -1) >= margin;
    const profileCompared = this.#profile !== undefined;
    if (!matched) {
      if (profileCompared && this.#o.speakers.findingFor(speakerId) === undefined) {
        this.#o.speakers.found(speakerId, { profileCompared });
        this.#o.loop.reassignSpeaker(speakerId);
      }
      return;
    }
    sp.settled = true;
    this.#o.speakers.found(speakerId, { profileCompared, match: { isUser: best.who.isUser, personId: best.who.isUser ? null : best.who.personId } });
    this.#o.loop.reassignSpeaker(speakerId);
    this.#o.metrics?.matched(best.who.isUser ? 'user' : 'person');
    this.#pendingSuggestions.set(speakerId, { personId: best.who.personId, name: best.who.name });
  }

  async #addSample(sp: Speaker, clip: Int16Array): Promise<void> {
    const sample = sp.sample!;
    sp.sample = undefined;
    if (this.#samples >= MAX_SAMPLES_PER_SESSION) return;
    this.#samples++;
    const r = await this.#o.voiceprints.addPersonSample(this.#o.uid, sample.personId, { pcm: clip, sampleRate: 16000, conversationId: this.#o.loop.conversationId ?? null, segmentId: sample.segmentId });
    if (r !== null) this.#o.metrics?.sampled();
  }

  /** A speaker said their name: the person of that name (created when the user has none) is suggested for them. */
  #named(speakerId: number, name: string): void {
    const sp = this.#speakers.get(speakerId);
    if (sp?.settled || this.#naming.has(speakerId) || this.#o.speakers.forSpeaker(speakerId) !== undefined) return;
    if (this.#o.speakers.findingFor(speakerId)?.match) return;
    this.#naming.add(speakerId);
    const { voiceprints, uid } = this.#o;
    void (async () => {
      const person = (await voiceprints.findPersonByName(uid, name)) ?? (await voiceprints.createPerson(uid, name));
      if (this.#state === 'closed' || this.#o.speakers.forSpeaker(speakerId) !== undefined || this.#o.speakers.findingFor(speakerId)?.match) return;
      this.#speaker(speakerId).settled = true;
      const profileCompared = this.#o.speakers.findingFor(speakerId)?.profileCompared ?? false;
      this.#o.speakers.found(speakerId, { profileCompared, match: { isUser: false, personId: person.id } });
      this.#o.loop.reassignSpeaker(speakerId);
      this.#o.metrics?.matched('name');
      this.#pendingSuggestions.set(speakerId, { personId: person.id, name: person.name });
    })()
      .catch((err: unknown) => this.#o.logger.warn({ sessionId: this.#o.sessionId, err: { name: (err as Error)?.name } }, 'person named in the transcript could not be stored'))
      .finally(() => this.#naming.delete(speakerId));
  }

  #suggest(speakerId: number, s: Suggestion, segmentId: string): void {
    if (this.#suggested.has(segmentId)) return;
    this.#suggested.add(segmentId);
    if (this.#suggested.size > MAX_SUGGESTED) this.#suggested.delete(this.#suggested.values().next().value!);
    this.#o.send(JSON.stringify({ type: ListenMessage.SPEAKER_LABEL_SUGGESTION, speaker_id: speakerId, person_id: s.personId, person_name: s.name, segment_id: segmentId }));
  }
}

/**
 * The stream ranges (seconds, as pairs) of a speaker's clip: its latest spans back to CLIP_MAX_S, the oldest one
 * trimmed to fit; a single span longer than that gives its centre.
 */
export function clipRanges(spans: readonly [number, number][]): number[] {
  const last = spans.at(-1);
  if (last === undefined) return [];
  if (last[1] - last[0] >= CLIP_MAX_S) {
    const mid = (last[0] + last[1]) / 2;
    return [mid - CLIP_MAX_S / 2, mid + CLIP_MAX_S / 2];
  }
  const out: number[] = [];
  let left = CLIP_MAX_S;
  for (let i = spans.length - 1; i >= 0 && left > 0; i--) {
    const [a, b] = spans[i]!;
    const from = Math.max(a, b - left);
    out.unshift(from, b);
    left -= b - from;
  }
  return out;
}
