// One live stream of the fake Deepgram: counts audio, answers scripted (or filler) Results, KeepAlive/Finalize/CloseStream, drops.
//
// Protocol as Deepgram documents it for `/v1/listen`: binary frames are audio; text frames are JSON control messages
// (`KeepAlive` gets no answer; `Finalize` flushes with `from_finalize: true`; `CloseStream` flushes, sends `Metadata`
// and closes 1000); an empty binary frame ends the stream like CloseStream; no audio or text for the idle window
// closes 1011 `NET-0001`. Each final Results covers the audio since the previous one (`start` + `duration`).
import { randomUUID } from 'node:crypto';
import type uWS from 'uWebSockets.js';
import type { Clock } from '../../engine/clock.js';
import type { ListenOptions } from './deepgram-query.js';
import type { LagHistogram } from './lag-histogram.js';

/** A word the fake will say; times in seconds from the start of the stream's audio. */
export interface ScriptedWord {
  word: string;
  punctuated_word?: string;
  speaker?: number;
  start: number;
  end: number;
  confidence?: number;
}

/** Sent as one final Results once `afterS` seconds of audio have arrived (words may be empty: a silent window). */
export interface ScriptedResult {
  afterS: number;
  words: ScriptedWord[];
}

/** How the accepted stream behaves. */
export interface StreamBehaviour {
  results?: ScriptedResult[];
  /** Filler Results every `autoEveryS` seconds of audio (speaker 0) when no results are scripted. */
  autoEveryS?: number;
  /** Drops the connection once this many audio bytes arrived: abruptly (no close frame) unless `dropCode` is set. */
  dropAfterBytes?: number;
  dropCode?: number;
  dropReason?: string;
  /** Holds every answer (Results, Metadata, the close after CloseStream) back this many real milliseconds. */
  answerDelayMs?: number;
}

export interface StreamContext {
  clock: Clock;
  lag: LagHistogram;
  totals: { bytes: number; chunks: number };
}

const FILLER = ['so', 'this', 'is', 'filler', 'speech'];

export class FakeStream {
  readonly id: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  readonly options: ListenOptions;
  readonly requestId = randomUUID();
  bytes = 0;
  chunks = 0;
  /** Every audio message in order, when the fake records audio (`recordAudio`). */
  readonly audio: Buffer[] = [];
  /** Smallest and largest audio message, in bytes. */
  minChunkBytes = Infinity;
  maxChunkBytes = 0;
  /** Audio messages that split a sample (length not a multiple of bytes per sample × channels, for PCM encodings). */
  oddChunks = 0;
  keepAlives = 0;
  /** `type` of every text message in arrival order (`KeepAlive`, `Finalize`, `CloseStream`, …; `<invalid>` if not JSON). */
  readonly controls: string[] = [];
  resultsSent = 0;
  metadataSent = false;
  open = true;
  closeCode: number | undefined;
  closedBy: 'client' | 'server' | undefined;
  /** Clock time of the last audio or text message (the idle rule). */
  lastActivityAt: number;

  ws: uWS.WebSocket<unknown> | undefined;
  readonly #ctx: StreamContext;
  readonly #pending: ScriptedResult[];
  readonly #behaviour: StreamBehaviour;
  readonly #timers = new Set<NodeJS.Timeout>();
  #cursorS = 0;
  #ending = false;
  #t0 = Infinity;

  constructor(id: number, headers: Record<string, string>, query: URLSearchParams, options: ListenOptions, behaviour: StreamBehaviour, ctx: StreamContext) {
    this.id = id;
    this.headers = headers;
    this.query = query;
    this.options = options;
    this.#behaviour = behaviour;
    this.#pending = [...(behaviour.results ?? [])].sort((a, b) => a.afterS - b.afterS);
    this.#ctx = ctx;
    this.lastActivityAt = ctx.clock.now();
  }

  /** Seconds of audio received (0 when the encoding does not say). */
  get audioS(): number {
    return this.options.bytesPerSecond ? this.bytes / this.options.bytesPerSecond : 0;
  }

  /** Queues more Results on this live stream. */
  say(result: ScriptedResult): void {
    this.#pending.push(result);
    this.#pending.sort((a, b) => a.afterS - b.afterS);
    this.#emitDue();
  }

  /** Cuts the TCP connection without a close frame, as a network failure would. */
  drop(): void {
    if (!this.open) return;
    this.closedBy = 'server';
    this.ws?.close();
  }

  /** Closes with a close frame, as Deepgram does on errors (e.g. 1011 `NET-0000`). */
  end(code: number, reason: string): void {
    if (!this.open) return;
    this.closedBy = 'server';
    this.ws?.end(code, reason);
  }

  onAudio(n: number): void {
    if (!this.open || this.#ending) return;
    if (n === 0) {
      this.controls.push('<empty binary>');
      this.#closeStream();
      return;
    }
    this.bytes += n;
    this.chunks++;
    if (n < this.minChunkBytes) this.minChunkBytes = n;
    if (n > this.maxChunkBytes) this.maxChunkBytes = n;
    if (n % this.options.frameBytes !== 0) this.oddChunks++;
    this.#ctx.totals.bytes += n;
    this.#ctx.totals.chunks++;
    this.lastActivityAt = this.#ctx.clock.now();
    const bps = this.options.bytesPerSecond;
    if (bps) {
      const d = performance.now() - (this.bytes / bps) * 1000;
      if (d < this.#t0) this.#t0 = d;
      this.#ctx.lag.add(d - this.#t0);
    }
    this.#emitDue();
    const b = this.#behaviour;
    if (b.dropAfterBytes !== undefined && this.bytes >= b.dropAfterBytes) {
      if (b.dropCode === undefined) this.drop();
      else this.end(b.dropCode, b.dropReason ?? '');
    }
  }

  onText(text: string): void {
    if (!this.open) return;
    this.lastActivityAt = this.#ctx.clock.now();
    let type: string;
    try {
      const msg = JSON.parse(text) as { type?: unknown };
      type = typeof msg?.type === 'string' ? msg.type : '<untyped>';
    } catch {
      type = '<invalid>';
    }
    this.controls.push(type);
    if (type === 'KeepAlive') this.keepAlives++;
    else if (type === 'Finalize' && !this.#ending) this.#flush(true);
    else if (type === 'CloseStream') this.#closeStream();
  }

  /** Called by the server when uWS reports the socket closed (by either side). */
  onClosed(code: number): void {
    if (!this.open) return;
    this.open = false;
    this.closeCode = code;
    this.closedBy ??= 'client';
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.ws = undefined;
  }

  /** Closes the stream as Deepgram does after the idle window. */
  idleClose(): void {
    this.end(1011, 'NET-0001');
  }

  #emitDue(): void {
    const audioS = this.audioS;
    while (this.#pending.length > 0 && this.#pending[0]!.afterS <= audioS) {
      const r = this.#pending.shift()!;
      this.#results(this.#cursorS, Math.max(r.afterS, this.#cursorS), r.words, false);
    }
    const every = this.#behaviour.autoEveryS;
    if (every && !this.#behaviour.results) {
      while (audioS - this.#cursorS >= every) this.#results(this.#cursorS, this.#cursorS + every, filler(this.#cursorS, this.#cursorS + every), false);
    }
  }

  /** Answers for all audio received so far: pending words that began in it, or filler, or an empty window. */
  #flush(fromFinalize: boolean): void {
    this.#emitDue();
    const audioS = this.audioS;
    if (audioS <= this.#cursorS) return;
    const words: ScriptedWord[] = [];
    while (this.#pending.length > 0 && (this.#pending[0]!.words[0]?.start ?? Infinity) < audioS) words.push(...this.#pending.shift()!.words);
    const auto = this.#behaviour.autoEveryS && !this.#behaviour.results;
    this.#results(this.#cursorS, audioS, auto ? filler(this.#cursorS, audioS) : words, fromFinalize);
  }

  #closeStream(): void {
    if (this.#ending) return;
    this.#ending = true;
    this.#flush(false);
    const metadata = JSON.stringify({
      type: 'Metadata',
      transaction_key: 'deprecated',
      request_id: this.requestId,
      sha256: '0'.repeat(64),
      created: new Date(this.#ctx.clock.now()).toISOString(),
      duration: round(this.audioS),
      channels: this.options.channels,
    });
    this.#later(() => {
      this.ws?.send(metadata, false);
      this.metadataSent = true;
      this.closedBy = 'server';
      this.ws?.end(1000, '');
    });
  }

  #results(startS: number, endS: number, words: ScriptedWord[], fromFinalize: boolean): void {
    this.#cursorS = endS;
    const o = this.options;
    const shown = (w: ScriptedWord) => (o.punctuated ? (w.punctuated_word ?? w.word) : w.word);
    const message = JSON.stringify({
      type: 'Results',
      channel_index: [0, 1],
      duration: round(endS - startS),
      start: round(startS),
      is_final: true,
      speech_final: true,
      from_finalize: fromFinalize,
      channel: {
        alternatives: [
          {
            transcript: words.map(shown).join(' '),
            confidence: words.length > 0 ? 0.98 : 0,
            words: words.map((w) => ({
              word: w.word,
              start: w.start,
              end: w.end,
              confidence: w.confidence ?? 0.98,
              ...(o.diarize ? { speaker: w.speaker ?? 0, speaker_confidence: 0.9 } : {}),
              ...(o.punctuated ? { punctuated_word: w.punctuated_word ?? w.word } : {}),
            })),
          },
        ],
      },
      metadata: {
        request_id: this.requestId,
        model_info: { name: `general-${o.model}`, version: '2025-01-01.0', arch: o.model },
        model_uuid: '00000000-0000-4000-8000-000000000000',
      },
    });
    this.#later(() => {
      this.ws?.send(message, false);
      this.resultsSent++;
    });
  }

  #later(fn: () => void): void {
    const delay = this.#behaviour.answerDelayMs ?? 0;
    if (delay <= 0) {
      fn();
      return;
    }
    const t = setTimeout(() => {
      this.#timers.delete(t);
      if (this.open) fn();
    }, delay);
    this.#timers.add(t);
  }
}

function round(s: number): number {
  return Math.round(s * 1000) / 1000;
}

/** Filler words spread evenly over [startS, endS]. */
export function filler(startS: number, endS: number): ScriptedWord[] {
  const step = (endS - startS) / FILLER.length;
  return FILLER.map((word, i) => ({
    word,
    punctuated_word: i === 0 ? 'So' : i === FILLER.length - 1 ? `${word}.` : word,
    speaker: 0,
    start: round(startS + i * step),
    end: round(startS + (i + 0.8) * step),
  }));
}
