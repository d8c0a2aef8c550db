// The live webhooks of a listen node: each session reads its user's realtime_transcript and audio_bytes endpoints
// when it starts (and again every LIVE_ENDPOINTS_REFRESH_MS), then hands its transcript steps and its PCM to one
// sender per endpoint. A session without endpoints holds an empty object and pays a length check per step.
import type { TranscriptSegment } from '../audio/segment.js';
import type { TimerId } from '../scheduler.js';
import type { WebhookEndpoint, WebhooksRepository } from '../db/webhooks.js';
import type { WebhookSecrets } from './secrets.js';
import { AudioSender } from './live-audio.js';
import { TranscriptSender, toLiveSegment } from './live-transcript.js';
import type { LiveContext } from './live-send.js';

/** How often a live session reads its user's webhook settings again: enabling, disabling or installing takes effect within it. */
export const LIVE_ENDPOINTS_REFRESH_MS = 60_000;

/** How long a stopping node waits for live requests still on the wire. */
export const LIVE_STOP_WAIT_MS = 5_000;

export interface LiveWebhooksOptions {
  readonly context: Omit<LiveContext, 'inFlight' | 'closing'>;
  readonly webhooks: WebhooksRepository;
  readonly secrets: WebhookSecrets;
}

/** The node's live webhooks: one per listen node. */
export class LiveWebhooks {
  readonly #ctx: LiveContext;
  readonly #o: LiveWebhooksOptions;

  constructor(o: LiveWebhooksOptions) {
    this.#o = o;
    this.#ctx = { ...o.context, inFlight: new Set(), closing: false };
  }

  /** A session's webhooks; load() them before the session streams. */
  session(uid: string, sessionId: string): LiveSessionWebhooks {
    return new LiveSessionWebhooks(this.#ctx, this.#o, uid, sessionId);
  }

  /** Waits (bounded) for requests on the wire, retries no more, and frees the keep-alive connections. */
  async close(): Promise<void> {
    this.#ctx.closing = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#ctx.inFlight]), new Promise((r) => (timer = setTimeout(r, LIVE_STOP_WAIT_MS)))]);
    clearTimeout(timer);
    await this.#ctx.client.close();
  }
}

const keyOf = (e: WebhookEndpoint): string => `${e.ownerKind}\u0000${e.ownerId}\u0000${e.url}\u0000${e.seconds ?? ''}`;

/** One session's senders, by endpoint. */
export class LiveSessionWebhooks {
  readonly #ctx: LiveContext;
  readonly #o: LiveWebhooksOptions;
  readonly uid: string;
  readonly sessionId: string;
  readonly #transcript = new Map<string, TranscriptSender>();
  readonly #audio = new Map<string, AudioSender>();
  /** Whether the session brings its PCM to this thread for audio senders: decided once, at load(). */
  #wantsPcm = false;
  #timer: TimerId | undefined;
  #ended = false;
  /** Samples handed to the audio senders (tests: none without an audio endpoint). */
  pcmSamples = 0;

  constructor(ctx: LiveContext, o: LiveWebhooksOptions, uid: string, sessionId: string) {
    this.#ctx = ctx;
    this.#o = o;
    this.uid = uid;
    this.sessionId = sessionId;
  }

  /** The endpoints at the session's start, and the timer that reads them again. Never throws. */
  async load(): Promise<void> {
    await this.#refresh(true);
    if (this.#ended) return;
    this.#timer = this.#ctx.scheduler.every(LIVE_ENDPOINTS_REFRESH_MS, () => this.#refresh(false));
  }

  /** True when an audio_bytes endpoint was set at the session's start: the session hands its channel-0 PCM to pcm(). */
  get wantsPcm(): boolean {
    return this.#wantsPcm;
  }

  /** Bytes the audio senders hold for the session now. */
  get heldAudioBytes(): number {
    let n = 0;
    for (const a of this.#audio.values()) n += a.heldBytes;
    return n;
  }

  /** The segments a transcript step sent the device. */
  segments(updated: readonly TranscriptSegment[]): void {
    if (this.#transcript.size === 0 || updated.length === 0) return;
    const live = updated.map(toLiveSegment);
    for (const s of this.#transcript.values()) s.add(live);
  }

  /** Channel 0's decoded PCM, 16 kHz (a view valid during the call). */
  pcm(samples: Int16Array): void {
    this.pcmSamples += samples.length;
    for (const a of this.#audio.values()) a.write(samples);
  }

  /** The session ended: the partial audio windows go, the settings are read no more. Idempotent. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#ctx.scheduler.cancel(this.#timer);
    for (const a of this.#audio.values()) a.end();
  }

  async #refresh(first: boolean): Promise<void> {
    if (this.#ended) return;
    const ctx = this.#ctx;
    let found: Record<'realtime_transcript' | 'audio_bytes', WebhookEndpoint[]>;
    const secrets = new Map<string, string[]>();
    try {
      found = await this.#o.webhooks.endpointsForTypes(this.uid, ['realtime_transcript', 'audio_bytes']);
      for (const e of [...found.realtime_transcript, ...found.audio_bytes]) {
        const owner = `${e.ownerKind}\u0000${e.ownerId}`;
        if (!secrets.has(owner)) secrets.set(owner, await this.#o.secrets.signingSecrets(e.ownerKind, e.ownerId, ctx.clock.now()));
      }
    } catch (err) {
      ctx.logger.warn({ sessionId: this.sessionId, err: { name: (err as Error)?.name } }, 'live webhook settings not read; the session keeps the ones it has');
      return;
    }
    if (this.#ended) return;
    if (first) this.#wantsPcm = found.audio_bytes.length > 0;
    const target = (e: WebhookEndpoint) => ({ endpoint: e, secrets: secrets.get(`${e.ownerKind}\u0000${e.ownerId}`)!, uid: this.uid, sessionId: this.sessionId });
    sync(this.#transcript, found.realtime_transcript, target, (t) => new TranscriptSender(ctx, t));
    // Whether PCM comes to this thread is settled at the start: without an audio endpoint then, later ones wait for
    // the user's next session.
    sync(this.#audio, this.#wantsPcm ? found.audio_bytes : [], target, (t) => new AudioSender(ctx, t));
  }
}

/** Brings `senders` in line with `endpoints`: new ones made, gone ones retired, the rest given fresh secrets. */
function sync<S extends { target: { secrets: readonly string[] }; retire(): void }>(
  senders: Map<string, S>,
  endpoints: readonly WebhookEndpoint[],
  target: (e: WebhookEndpoint) => { endpoint: WebhookEndpoint; secrets: string[]; uid: string; sessionId: string },
  make: (t: ReturnType<typeof target>) => S,
): void {
  const seen = new Set<string>();
  for (const e of endpoints) {
    const key = keyOf(e);
    seen.add(key);
    const s = senders.get(key);
    if (s) s.target.secrets = target(e).secrets;
    else senders.set(key, make(target(e)));
  }
  for (const [key, s] of senders) {
    if (seen.has(key)) continue;
    s.retire();
    senders.delete(key);
  }
}
