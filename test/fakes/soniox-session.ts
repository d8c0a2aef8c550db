// One connection to the fake Soniox realtime server: checks the start request, follows audio time, answers with the script.
//
// The model of the provider (from its public docs): the first text frame is the start request (key, model, raw
// audio format, rate, channels, language hints); binary frames are audio; `{"type":"keepalive"}` and
// `{"type":"finalize"}` are control messages; an empty frame (text or binary) ends the audio. A token is answered
// non-final once the audio has passed its end and final `finalLagMs` later, or at once on finalize (then `<fin>`) or
// at the end of audio (then `finished: true` and a close). `final_audio_proc_ms` never passes a word not yet final.
// Every problem is one error frame `{error_code, error_type, error_message, request_id}` followed by a close.
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { BYTES_PER_SAMPLE, checkStartRequest, type Problem } from './soniox-start-request.js';

export interface ScriptedToken {
  /** Sub-word text as the provider sends it (" are", "?"), or `<end>` for an endpoint (sent only with endpoint detection). */
  text: string;
  start_ms: number;
  end_ms: number;
  /** Numbered from 1, sent as a string; left out unless the start request enabled diarization. */
  speaker?: number;
  language?: string;
}

/** What one connection does; queued with `FakeSoniox.script()`. */
export interface SessionScript {
  /** Answer the upgrade with this HTTP status instead of a WebSocket (e.g. 429 with Retry-After seconds). */
  refuse?: { status: number; retryAfterS?: number };
  /** Accept the TCP connection and never answer the upgrade. */
  hang?: boolean;
  /** The transcript, in time order. */
  tokens?: ScriptedToken[];
  /** Audio past a token's end before it turns final, in milliseconds. @defaultValue 1000 */
  finalLagMs?: number;
  /** Send this error frame and close once `afterMs` of audio arrived (0: right after the start request). */
  error?: { afterMs: number; code: number; type: string; message: string };
  /** Destroy the TCP connection (no close frame, no answer) once `afterMs` of audio arrived. */
  drop?: { afterMs: number };
  /** Send every answer this many real milliseconds late, in order. */
  delayMs?: number;
  /** Never answer anything after the start request (a provider that hangs mid-stream). */
  stall?: boolean;
  /**
   * With no `tokens`: a filler word every this many seconds of audio, for as long as the audio lasts (the load
   * bench's transcript; the words before the last final one are forgotten, so a long stream costs no memory).
   */
  fillerEveryS?: number;
}

/** What the fake received on one connection, for assertions. */
export interface ReceivedSession {
  authorization: string | undefined;
  /** The parsed start request, once received. */
  config: Record<string, unknown> | undefined;
  audioBytes: number;
  audio: Buffer[];
  /** Binary frames whose length is not a whole number of samples × channels. */
  misalignedFrames: number;
  /** Clock times of keepalive messages. */
  keepalives: number[];
  finalizes: number;
  /** How the end of audio was signalled. */
  endOfAudio: 'text' | 'binary' | undefined;
  /** Every answer sent, parsed. */
  answers: Record<string, unknown>[];
  error: { code: number; type: string } | undefined;
  dropped: boolean;
  closed: boolean;
}

export interface SessionContext {
  apiKey: string;
  models: readonly string[];
  languages: ReadonlySet<string>;
  now: () => number;
  /** Keep every audio frame and answer in the record (tests); false keeps counts only (the load bench). */
  record: boolean;
  /** Told of each audio frame: its bytes and how late its end arrived beyond the stream's least-delayed frame, in ms. */
  onAudio?: (bytes: number, lagMs: number) => void;
  /** The time frames' lateness is read on, ms (finer than `now` when real). */
  lagNow: () => number;
}

export class FakeSonioxSession {
  readonly record: ReceivedSession;
  readonly #ws: WebSocket;
  readonly #script: SessionScript;
  readonly #ctx: SessionContext;
  readonly #headerKey: string | undefined;
  #state: 'config' | 'streaming' | 'done' = 'config';
  #bytesPerMs = 0;
  #frameBytes = 1;
  #lastActivity: number;
  /** Index of the first token not yet final. */
  #next = 0;
  #finalMs = 0;
  #outbox: Promise<void> = Promise.resolve();
  /** The least (real arrival − audio time) of any frame so far, ms: the stream's least-delayed frame. */
  #t0 = Infinity;
  /** Filler words (SessionScript.fillerEveryS) made so far and not yet forgotten. */
  #filler: ScriptedToken[] = [];
  #fillerMade = 0;

  constructor(ws: WebSocket, script: SessionScript, ctx: SessionContext, authorization: string | undefined, protocolKey: string | undefined) {
    this.#ws = ws;
    this.#script = script;
    this.#ctx = ctx;
    this.#lastActivity = ctx.now();
    const bearer = authorization?.match(/^Bearer (.+)$/)?.[1];
    this.#headerKey = bearer ?? protocolKey;
    this.record = {
      authorization, config: undefined, audioBytes: 0, audio: [], misalignedFrames: 0, keepalives: [], finalizes: 0,
      endOfAudio: undefined, answers: [], error: undefined, dropped: false, closed: false,
    };
    ws.on('message', (data: Buffer, isBinary: boolean) => this.#receive(data, isBinary));
    ws.on('close', () => {
      this.record.closed = true;
      this.#state = 'done';
    });
  }

  get #audioMs(): number {
    return this.#bytesPerMs > 0 ? this.record.audioBytes / this.#bytesPerMs : 0;
  }

  /** The idle watchdog: nothing (audio or keepalive) for `idleMs`. */
  checkIdle(idleMs: number): void {
    if (this.#state === 'done' || this.#ctx.now() - this.#lastActivity < idleMs) return;
    if (this.record.audioBytes === 0) this.#fail({ code: 400, type: 'invalid_request', message: 'No audio received.' });
    else this.#fail({ code: 408, type: 'request_timeout', message: 'Request timeout.' });
  }

  #receive(data: Buffer, isBinary: boolean): void {
    if (this.#state === 'done') return;
    if (this.#state === 'config') return this.#start(data, isBinary);
    if (data.length === 0) return this.#endOfAudio(isBinary ? 'binary' : 'text');
    if (isBinary) return this.#audio(data);
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString('utf8'));
    } catch {
      return this.#fail({ code: 400, type: 'invalid_request', message: 'Invalid control message.' });
    }
    const type = (msg as { type?: unknown } | null)?.type;
    if (type === 'keepalive') {
      this.#lastActivity = this.#ctx.now();
      this.record.keepalives.push(this.#lastActivity);
    } else if (type === 'finalize') {
      this.record.finalizes++;
      this.#answer(this.#finalizeUpTo(this.#audioMs, true));
    } else {
      this.#fail({ code: 400, type: 'invalid_request', message: 'Invalid control message.' });
    }
  }

  #start(data: Buffer, isBinary: boolean): void {
    if (isBinary) return this.#fail({ code: 400, type: 'invalid_request', message: 'Start request must be a text message.' });
    let cfg: unknown;
    try {
      cfg = JSON.parse(data.toString('utf8'));
    } catch {
      return this.#fail({ code: 400, type: 'invalid_request', message: 'Start request is not valid JSON.' });
    }
    this.record.config = cfg as Record<string, unknown>;
    const checked = checkStartRequest(cfg, this.#headerKey, this.#ctx);
    if ('code' in checked) return this.#fail(checked);
    this.#bytesPerMs = checked.bytesPerMs;
    const c = cfg as Record<string, number>;
    this.#frameBytes = (BYTES_PER_SAMPLE[String(c.audio_format)] ?? 1) * (c.num_channels ?? 1);
    this.#state = 'streaming';
    this.#lastActivity = this.#ctx.now();
    this.#reached(0);
  }

  #audio(data: Buffer): void {
    this.#lastActivity = this.#ctx.now();
    if (this.#ctx.record) this.record.audio.push(Buffer.from(data));
    this.record.audioBytes += data.length;
    if (data.length % this.#frameBytes !== 0) this.record.misalignedFrames++;
    if (this.#ctx.onAudio) {
      const d = this.#ctx.lagNow() - this.#audioMs;
      if (d < this.#t0) this.#t0 = d;
      this.#ctx.onAudio(data.length, d - this.#t0);
    }
    if (this.#reached(this.#audioMs)) return;
    this.#answer(this.#progress());
  }

  /** Scripted drop or error once audio reaches their point; true when the stream ended. */
  #reached(audioMs: number): boolean {
    const { drop, error } = this.#script;
    if (drop && audioMs >= drop.afterMs) {
      this.record.dropped = true;
      this.#state = 'done';
      this.#ws.terminate();
      return true;
    }
    if (error && audioMs >= error.afterMs) {
      this.#fail(error);
      return true;
    }
    return false;
  }

  #endOfAudio(kind: 'text' | 'binary'): void {
    this.record.endOfAudio = kind;
    const answer = { ...this.#finalizeUpTo(this.#audioMs, false), finished: true };
    this.#state = 'done';
    this.#answer(answer, () => this.#ws.close(1000));
  }

  #tokens(): ScriptedToken[] {
    const every = this.#script.fillerEveryS;
    if (every !== undefined && every > 0 && this.#script.tokens === undefined) return this.#fillerTokens(every * 1000);
    const tokens = this.#script.tokens ?? [];
    return this.record.config?.enable_endpoint_detection === true ? tokens : tokens.filter((t) => t.text !== '<end>');
  }

  /**
   * Filler words up to the audio received, each a 400 ms sentence of its own (so a client's segmenter cuts a segment
   * at each, as provider_a's fake sends a Results every 2 s), one per `everyMs`; those already final are dropped.
   */
  #fillerTokens(everyMs: number): ScriptedToken[] {
    if (this.#next > 0) {
      this.#filler.splice(0, this.#next);
      this.#next = 0;
    }
    for (let start = this.#fillerMade * everyMs; start < this.#audioMs; start = ++this.#fillerMade * everyMs) {
      this.#filler.push({ text: this.#fillerMade === 0 ? 'Bench.' : ' Bench.', start_ms: start, end_ms: start + 400 });
    }
    return this.#filler;
  }

  #wire(t: ScriptedToken, isFinal: boolean, endMs = t.end_ms): Record<string, unknown> {
    const cfg = this.record.config ?? {};
    const out: Record<string, unknown> = { text: t.text, start_ms: t.start_ms, end_ms: endMs, confidence: 0.97, is_final: isFinal };
    if (cfg.enable_speaker_diarization === true && t.text !== '<end>') out.speaker = String(t.speaker ?? 1);
    if (cfg.enable_language_identification === true && t.text !== '<end>') out.language = t.language ?? 'en';
    return out;
  }

  /** New final tokens, then the spoken non-final ones. */
  #progress(): Record<string, unknown> {
    const tokens = this.#tokens();
    const audioMs = this.#audioMs;
    const lag = this.#script.finalLagMs ?? 1000;
    const out: Record<string, unknown>[] = [];
    while (this.#next < tokens.length && tokens[this.#next]!.end_ms + lag <= audioMs) out.push(this.#wire(tokens[this.#next++]!, true));
    for (let i = this.#next; i < tokens.length && tokens[i]!.end_ms <= audioMs; i++) out.push(this.#wire(tokens[i]!, false));
    const open = tokens[this.#next];
    let finalMs = Math.max(0, audioMs - lag);
    if (open && open.start_ms < audioMs) finalMs = Math.min(finalMs, open.start_ms);
    this.#finalMs = Math.max(this.#finalMs, finalMs);
    return { tokens: out, final_audio_proc_ms: this.#finalMs, total_audio_proc_ms: audioMs };
  }

  /** Every word begun before `audioMs` becomes final (a word cut by the end of audio ends there). */
  #finalizeUpTo(audioMs: number, fin: boolean): Record<string, unknown> {
    const tokens = this.#tokens();
    const out: Record<string, unknown>[] = [];
    while (this.#next < tokens.length && tokens[this.#next]!.start_ms < audioMs) {
      const t = tokens[this.#next++]!;
      out.push(this.#wire(t, true, Math.min(t.end_ms, audioMs)));
    }
    if (fin) out.push({ text: '<fin>', is_final: true });
    this.#finalMs = Math.max(this.#finalMs, audioMs);
    return { tokens: out, final_audio_proc_ms: this.#finalMs, total_audio_proc_ms: audioMs };
  }

  #fail(p: Problem): void {
    this.record.error = { code: p.code, type: p.type };
    this.#state = 'done';
    const frame = { error_code: p.code, error_type: p.type, error_message: p.message, request_id: randomUUID() };
    this.#answer(frame, () => this.#ws.close(1000), true);
  }

  /** Sends in order, `delayMs` late when scripted; nothing after the start request when stalled (errors excepted). */
  #answer(msg: Record<string, unknown>, then?: () => void, isError = false): void {
    if (this.#script.stall && !isError) return;
    const send = (): void => {
      if (this.#ws.readyState !== this.#ws.OPEN) return;
      if (this.#ctx.record) this.record.answers.push(msg);
      this.#ws.send(JSON.stringify(msg));
      then?.();
    };
    const delayMs = this.#script.delayMs ?? 0;
    if (delayMs <= 0) return send();
    this.#outbox = this.#outbox.then(() => new Promise<void>((r) => setTimeout(r, delayMs))).then(send);
  }
}
