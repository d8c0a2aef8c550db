// `npm run listen -- <audio file> [options]`: streams a recording to /v4/listen encoded the way a device encodes it,
// prints the session's status and transcript as they come, and ends with a summary.
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { splitAdts } from '../native/adts.js';

const USAGE = `usage: npm run listen -- <file.wav|.mp3|.ogg|…> [options]

Decodes the file with ffmpeg, encodes it as a device would, streams it to /v4/listen and prints the transcript.

  --codec C      opus (default: 16 kHz, one 10 ms packet per message), opus_fs320 (20 ms packets),
                 pcm16 (16 kHz s16le), pcm8 (8 kHz s16le), aac (ADTS frames), lc3 (10 ms frames of 40 bytes),
                 lc3_fs1030 (10 ms frames of 30 bytes)
  --uid U        the user to stream as (default alice)
  --url URL      the service (default ws://localhost:$PORT, PORT defaulting to 8080)
  --token T      an ID token for U (default: one from the local issuer in DATA_DIR, as npm run token makes)
  --language L   the session's language (default en)
  --realtime     send the audio at the pace it plays (default)
  --fast         send it as fast as the service takes it (at most 2.5 MB/s)
  --keep-open    leave the conversation in progress (default: end it, wait for it to be processed)
  --wait S       at most this many seconds for the transcript to settle after the audio (default 30;
                 raise it for a long file sent --fast to a slow engine)
  -h, --help     this text`;

const CODECS = ['opus', 'opus_fs320', 'pcm16', 'pcm8', 'aac', 'lc3', 'lc3_fs1030'] as const;
type Codec = (typeof CODECS)[number];

/** Silence sent after the file: a device keeps streaming, and the speech engine needs a pause to end the last utterance. */
const TRAILING_SILENCE_S = 1.5;
/** Once the transcript reaches the end of the audio, it counts as settled when unchanged for this long. */
const SETTLE_MS = 3000;
/** How near the end of the file's audio a segment must end for the transcript to have reached it. */
const CAUGHT_UP_SLACK_MS = 2500;
/**
 * Short of that (an engine still working through audio sent --fast, or silence at the end), this long unchanged.
 * Before any segment, the wait is --wait's.
 */
const QUIET_MS = 10_000;
/** How long to wait for the ended conversation's processing. */
const PROCESSING_WAIT_MS = 20_000;
/**
 * --fast sends at most this many bytes per window (2.5 MB/s, 80 times real time for pcm16): a session may leave only
 * LISTEN_MAX_INBOUND_BYTES (1 MiB by default) undecoded before the server closes it 1013, and a burst past the
 * socket's reads would reach that before the first decode.
 */
const FAST_WINDOW_BYTES = 128 * 1024;
const FAST_WINDOW_MS = 50;
/** A keep-alive (a binary message of at most 2 bytes) this often while waiting, well inside the 90 s inactivity rule. */
const KEEP_ALIVE_MS = 15_000;

interface Frame {
  bytes: Uint8Array;
  ms: number;
}

interface Segment {
  id: string;
  text: string;
  speaker: string;
  is_user: boolean;
  start: number;
  end: number;
}

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

function parse(): { file: string; codec: Codec; uid: string; url: string; token?: string; language: string; fast: boolean; keepOpen: boolean; waitMs: number } {
  let a;
  try {
    a = parseArgs({
      allowPositionals: true,
      options: {
        codec: { type: 'string', default: 'opus' },
        uid: { type: 'string', default: 'alice' },
        url: { type: 'string' },
        token: { type: 'string' },
        language: { type: 'string', default: 'en' },
        realtime: { type: 'boolean' },
        fast: { type: 'boolean' },
        'keep-open': { type: 'boolean' },
        wait: { type: 'string', default: '30' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    fail(`${(err as Error).message}\n\n${USAGE}`);
  }
  const v = a.values;
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (a.positionals.length !== 1) fail(USAGE);
  if (!(CODECS as readonly string[]).includes(v.codec)) fail(`--codec must be one of ${CODECS.join(', ')}`);
  if (v.realtime && v.fast) fail('--realtime and --fast exclude each other');
  const waitS = Number(v.wait);
  if (!Number.isFinite(waitS) || waitS <= 0) fail('--wait must be a positive number of seconds');
  return {
    file: a.positionals[0]!,
    codec: v.codec as Codec,
    uid: v.uid,
    url: (v.url ?? `ws://localhost:${process.env.PORT || 8080}`).replace(/^http/, 'ws').replace(/\/+$/, ''),
    ...(v.token !== undefined && { token: v.token }),
    language: v.language,
    fast: v.fast === true,
    keepOpen: v['keep-open'] === true,
    waitMs: waitS * 1000,
  };
}

/** Runs ffmpeg with `args`, `input` on its stdin; resolves with its stdout. */
function ffmpeg(args: string[], input?: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const p = spawn('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', ...args], { stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    p.stdout?.on('data', (c: Buffer) => out.push(c));
    p.stderr?.on('data', (c: Buffer) => err.push(c));
    p.on('error', (e) => reject(new Error(`ffmpeg could not run (${e.message}): install it (apt-get install ffmpeg)`)));
    p.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg: ${Buffer.concat(err).toString().trim() || `exit ${code}`}`))));
    if (input && p.stdin) {
      p.stdin.on('error', () => undefined); // ffmpeg failing early closes its stdin; its exit says why
      p.stdin.end(input);
    }
  });
}

/** The file as mono s16le at `rate`, with the trailing silence. */
async function decode(file: string, rate: number): Promise<Int16Array> {
  const b = await ffmpeg(['-i', file, '-f', 's16le', '-acodec', 'pcm_s16le', '-ac', '1', '-ar', String(rate), '-']);
  const pcm = new Int16Array(b.length / 2 + Math.round(TRAILING_SILENCE_S * rate));
  pcm.set(new Int16Array(b.buffer, b.byteOffset, Math.floor(b.length / 2)));
  return pcm;
}

/** Cuts `pcm` into frames of `n` samples, the last one zero-padded. */
function* cut(pcm: Int16Array, n: number): Generator<Int16Array> {
  for (let i = 0; i < pcm.length; i += n) {
    const f = new Int16Array(n);
    f.set(pcm.subarray(i, Math.min(pcm.length, i + n)));
    yield f;
  }
}

const bytesOf = (pcm: Int16Array): Uint8Array => new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);

/** The messages a device would send for `file` in `codec`, and the sample_rate it names. */
async function encode(file: string, codec: Codec): Promise<{ frames: Frame[]; sampleRate: number; audioMs: number }> {
  const rate = codec === 'pcm8' ? 8000 : 16000;
  const pcm = await decode(file, rate);
  const audioMs = (pcm.length / rate) * 1000 - TRAILING_SILENCE_S * 1000;
  const frames: Frame[] = [];
  switch (codec) {
    case 'pcm16':
    case 'pcm8':
      for (const f of cut(pcm, rate / 50)) frames.push({ bytes: bytesOf(f), ms: 20 });
      break;
    case 'opus':
    case 'opus_fs320': {
      const { OpusEncoderStream } = await import('../native/opus.js');
      const enc = new OpusEncoderStream(rate);
      const n = codec === 'opus' ? 160 : 320;
      for (const f of cut(pcm, n)) frames.push({ bytes: enc.encode(f), ms: (n / rate) * 1000 });
      break;
    }
    case 'lc3':
    case 'lc3_fs1030': {
      const { Lc3Encoder } = await import('../native/index.js');
      const enc = new Lc3Encoder(10_000, rate);
      const bytes = codec === 'lc3' ? 40 : 30;
      for (const f of cut(pcm, enc.frameSamples)) frames.push({ bytes: enc.encode(f, bytes), ms: 10 });
      break;
    }
    case 'aac': {
      const adts = new Uint8Array(await ffmpeg(['-f', 's16le', '-ar', String(rate), '-ac', '1', '-i', '-', '-c:a', 'aac', '-b:a', '48k', '-f', 'adts', '-'], bytesOf(pcm)));
      const parts = splitAdts(adts);
      if (parts === null) throw new Error('ffmpeg wrote something that is not ADTS');
      for (const p of parts) frames.push({ bytes: adts.subarray(p.offset, p.offset + p.length), ms: (p.samples / p.sampleRate) * 1000 });
      break;
    }
  }
  return { frames, sampleRate: rate, audioMs };
}

/** An ID token for `uid` from the local issuer, the one `npm run token` prints. */
async function localToken(uid: string): Promise<string> {
  const [{ loadConfig }, { systemClock }, { LocalIssuer }] = await Promise.all([import('../engine/config.js'), import('../engine/clock.js'), import('../engine/identity/id-tokens.js')]);
  const config = loadConfig();
  if (config.idTokenJwksUrl) fail('ID_TOKEN_JWKS_URL is set: tokens come from your identity provider; pass one with --token');
  const issuer = await LocalIssuer.open(config.dataDir, { issuer: config.idTokenIssuer, audience: config.idTokenAudience, clockToleranceS: config.idTokenClockToleranceS, clock: systemClock });
  return issuer.sign(uid, config.idTokenTtlS);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const seconds = (ms: number): string => (ms / 1000).toFixed(1);
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;
const words = (text: string): number => text.split(/\s+/).filter((w) => w.length > 0).length;

/** Prints the transcript: a segment sent again with the same id replaces its line (redrawn in place on a terminal). */
class Transcript {
  readonly segments = new Map<string, Segment>();
  /** Ids of the segment lines at the bottom of a terminal, with nothing printed after them: redrawable. */
  #bottom: string[] = [];
  /** The terminal rows each of those lines took. */
  #bottomRows: number[] = [];
  readonly #tty = process.stdout.isTTY === true;
  firstWordsAt: number | undefined;
  /** The latest end time of any segment, in conversation seconds. */
  lastEnd = 0;
  changedAt = 0;

  line(text: string): void {
    process.stdout.write(`${text}\n`);
    this.#bottom = [];
    this.#bottomRows = [];
  }

  #format(s: Segment): string {
    return `${s.start.toFixed(1).padStart(6)}–${s.end.toFixed(1).padEnd(6)} ${s.speaker}${s.is_user ? ' (you)' : ''}  ${s.text}`;
  }

  update(list: Segment[], now: number): void {
    this.changedAt = now;
    for (const s of list) {
      const known = this.segments.has(s.id);
      this.segments.set(s.id, s);
      if (this.firstWordsAt === undefined && words(s.text) > 0) this.firstWordsAt = now;
      if (s.end > this.lastEnd) this.lastEnd = s.end;
      const at = this.#bottom.indexOf(s.id);
      if (known && this.#tty && at >= 0) {
        // Up over the lines as they were printed (a longer text may now wrap onto more rows), then print them anew.
        const up = this.#bottomRows.slice(at).reduce((a, b) => a + b, 0);
        process.stdout.write(`\x1b[${up}F\x1b[J`);
        this.#bottomRows.length = at;
        for (const id of this.#bottom.slice(at)) this.#print(` ${this.#format(this.segments.get(id)!)}`);
        continue;
      }
      if (known) {
        process.stdout.write(`~${this.#format(s)}\n`);
        this.#bottom = [];
        this.#bottomRows = [];
      } else {
        this.#bottom.push(s.id);
        this.#print(` ${this.#format(s)}`);
      }
    }
  }

  #print(line: string): void {
    process.stdout.write(`${line}\n`);
    this.#bottomRows.push(Math.max(1, Math.ceil(line.length / (process.stdout.columns || 80))));
  }

  remove(ids: string[], now: number): void {
    this.changedAt = now;
    for (const id of ids) this.segments.delete(id);
    this.line(`- ${ids.length} segment${ids.length === 1 ? '' : 's'} merged away`);
  }

  get words(): number {
    let n = 0;
    for (const s of this.segments.values()) n += words(s.text);
    return n;
  }
}

async function main(): Promise<void> {
  const o = parse();
  let encoded;
  try {
    encoded = await encode(o.file, o.codec);
  } catch (err) {
    fail((err as Error).message);
  }
  const token = o.token ?? (await localToken(o.uid));
  const query = new URLSearchParams({ uid: o.uid, codec: o.codec, sample_rate: String(encoded.sampleRate), language: o.language });
  const ws = new WebSocket(`${o.url}/v4/listen?${query}`, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
  const out = new Transcript();

  let ready!: () => void;
  const readyP = new Promise<void>((r) => (ready = r));
  let closed: { code: number; reason: string } | undefined;
  let onClosed!: () => void;
  const closedP = new Promise<void>((r) => (onClosed = r));
  let conversationId: string | undefined;
  let processed!: () => void;
  const processedP = new Promise<void>((r) => (processed = r));

  ws.on('unexpected-response', (_req, res) => {
    const body: Buffer[] = [];
    res.on('data', (c: Buffer) => body.push(c));
    res.on('end', () => fail(`refused: HTTP ${res.statusCode} ${Buffer.concat(body).toString()}`, 1));
  });
  ws.on('error', (err) => {
    if (!closed) fail(`cannot connect to ${o.url}: ${err.message}`, 1);
  });
  ws.on('close', (code, reason) => {
    closed = { code, reason: reason.toString() };
    onClosed();
    ready();
  });
  ws.on('message', (data, isBinary) => {
    const now = Date.now();
    const text = isBinary ? '' : data.toString();
    if (isBinary || text === 'ping') return;
    let msg: any;
    try {
      msg = JSON.parse(text);
    } catch {
      out.line(`? ${text.slice(0, 80)}`);
      return;
    }
    if (Array.isArray(msg)) return out.update(msg as Segment[], now);
    switch (msg.type) {
      case 'service_status': {
        const extra = [msg.provider, msg.reason, msg.outcome].filter((x) => typeof x === 'string').join(' ');
        out.line(`status ${msg.status}${extra ? ` (${extra})` : ''}`);
        if (msg.status === 'ready') ready();
        return;
      }
      case 'segments_deleted':
        return out.remove(msg.segment_ids ?? [], now);
      case 'memory_processing_started':
        conversationId ??= msg.memory?.id;
        return out.line(`conversation ${msg.memory?.id} processing`);
      case 'memory_created': {
        const st = msg.memory?.structured ?? {};
        conversationId ??= msg.memory?.id;
        const title = [st.emoji, st.title].filter((x) => typeof x === 'string' && x.length > 0).join(' ');
        out.line(`conversation ${msg.memory?.id} ${msg.memory?.discarded ? 'discarded (too little to keep)' : `processed${title ? `: ${title}` : ''}`}`);
        return processed();
      }
      default:
        out.line(`message ${msg.type}`);
    }
  });

  await readyP;
  const startedAt = Date.now();
  let sentAt = startedAt;
  if (!closed) {
    // Real time: each frame leaves when its audio would have been recorded. Fast: as fast as the socket drains.
    let dueMs = 0;
    let [windowStart, windowBytes] = [startedAt, 0];
    for (const f of encoded.frames) {
      if (closed) break;
      if (o.fast) {
        if (windowBytes >= FAST_WINDOW_BYTES) {
          await sleep(windowStart + FAST_WINDOW_MS - Date.now());
          [windowStart, windowBytes] = [Date.now(), 0];
        }
        windowBytes += f.bytes.byteLength;
        if (ws.bufferedAmount > FAST_WINDOW_BYTES) await new Promise<void>((r) => ws.send(f.bytes, () => r()));
        else ws.send(f.bytes);
        continue;
      }
      const wait = startedAt + dueMs - Date.now();
      if (wait > 0) await sleep(wait);
      ws.send(f.bytes);
      dueMs += f.ms;
    }
    sentAt = Date.now();
  }

  // Wait for the transcript to settle: unchanged for a while after the audio, bounded.
  const deadline = sentAt + o.waitMs;
  let lastKeepAlive = Date.now();
  // Segment times count from the conversation's start: in a new conversation, a segment ending near the file's end
  // says the engine caught up with the audio (sent --fast, it may still be working through it).
  const caughtUpS = (encoded.audioMs - CAUGHT_UP_SLACK_MS) / 1000;
  while (!closed && Date.now() < deadline) {
    const quiet = Date.now() - Math.max(sentAt, out.changedAt);
    if (out.segments.size > 0 && quiet >= (out.lastEnd >= caughtUpS ? SETTLE_MS : QUIET_MS)) break;
    if (Date.now() - lastKeepAlive >= KEEP_ALIVE_MS) {
      ws.send(new Uint8Array(1));
      lastKeepAlive = Date.now();
    }
    await sleep(100);
  }

  if (!closed && !o.keepOpen) {
    // End the conversation now, as a device's "stop" does, and wait (bounded) for it to be processed.
    const http = o.url.replace(/^ws/, 'http');
    try {
      const res = await fetch(`${http}/v1/conversations`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
      if (res.status === 200) {
        const body = (await res.json()) as { memory?: { id?: string } };
        conversationId ??= body.memory?.id;
        await Promise.race([processedP, closedP, sleep(PROCESSING_WAIT_MS)]);
      } else if (res.status === 404) out.line('no conversation to end (nothing was transcribed)');
      else out.line(`ending the conversation failed: HTTP ${res.status} ${await res.text()}`);
    } catch (err) {
      out.line(`ending the conversation failed: ${(err as Error).message}`);
    }
  }
  const byServer = closed;
  if (!closed) {
    ws.close(1000);
    await Promise.race([closedP, sleep(5000)]);
  }
  if (byServer) out.line(`closed by the server: ${byServer.code}${byServer.reason ? ` ${byServer.reason}` : ''}`);

  const first = out.firstWordsAt === undefined ? 'no words' : `first words ${seconds(out.firstWordsAt - startedAt)} s after the audio started`;
  const conversation = conversationId ?? (o.keepOpen ? 'in progress (resumed by the next session)' : 'none');
  out.line(
    `summary: ${plural(out.words, 'word')} in ${plural(out.segments.size, 'segment')} from ${seconds(encoded.audioMs)} s of ${o.codec} ` +
      `(${o.fast ? 'fast' : 'real time'}), ${first}, conversation ${conversation}`,
  );
  process.exit(byServer ? 1 : 0);
}

await main();
