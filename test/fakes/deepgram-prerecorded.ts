// The fake Deepgram's pre-recorded API: `POST /v1/listen` with the audio as the body, answered with Deepgram's
// response shape (metadata, results.channels[].alternatives[]), scripted transcripts, refusals or no answer at all.
//
// What it checks, as Deepgram does: `Authorization: Token <key>` (401), the query's options (deepgram-query.ts, 400),
// a body that is not empty (400) and, without `encoding`, a WAV container it can read (400 "corrupt or unsupported
// data"). The audio's duration comes from the container (or from encoding, sample_rate and channels for raw audio).
import { createHash, randomUUID } from 'node:crypto';
import type uWS from 'uWebSockets.js';
import { credential, refusalOf } from './deepgram-handshake.js';
import { checkListenQuery } from './deepgram-query.js';

/** What the next request (that passed the key and query checks) meets. */
export type PrerecordedStep =
  /** The transcript (empty: nothing heard), spread evenly over the audio as words. */
  | { kind: 'answer'; transcript: string; detectedLanguage?: string }
  | { kind: 'reject'; status: number; errMsg?: string }
  /** A 200 whose body is not Deepgram's JSON. */
  | { kind: 'garbage' }
  /** Never answers (a timeout on the client). */
  | { kind: 'hold' };

/** One request as the fake saw it. */
export interface PrerecordedRequest {
  query: URLSearchParams;
  contentType: string | undefined;
  bytes: number;
  /** Seconds of audio in the body, when it was readable. */
  durationS: number | undefined;
  /** The PCM samples (16-bit, first channel) the body held, when it was a 16-bit WAV or linear16. */
  samples: Int16Array | undefined;
  status: number;
}

export interface FakePrerecorded {
  readonly requests: PrerecordedRequest[];
  /** Queues steps for the next requests. */
  script(...steps: PrerecordedStep[]): void;
  /** What a request meets when nothing is scripted. @defaultValue an empty transcript */
  fallback: PrerecordedStep;
  /** Ends every held request. */
  close(): void;
}

const MODEL_UUID = '1abfe86b-e047-4eed-858a-35e5625b41ee';

/** Duration and 16-bit samples of a WAV body, or undefined when it is not one Deepgram could read. */
function readWav(b: Buffer): { durationS: number; samples: Int16Array | undefined } | undefined {
  if (b.length < 44 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') return undefined;
  let at = 12;
  let fmt: { channels: number; rate: number; bits: number } | undefined;
  while (at + 8 <= b.length) {
    const id = b.toString('latin1', at, at + 4);
    const size = b.readUInt32LE(at + 4);
    if (id === 'fmt ') fmt = { channels: b.readUInt16LE(at + 10), rate: b.readUInt32LE(at + 12), bits: b.readUInt16LE(at + 22) };
    if (id === 'data') {
      if (!fmt || fmt.rate === 0 || fmt.channels === 0 || fmt.bits === 0) return undefined;
      const data = b.subarray(at + 8, Math.min(b.length, at + 8 + size));
      const frameBytes = (fmt.bits / 8) * fmt.channels;
      const samples = fmt.bits === 16 && fmt.channels === 1 ? new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length - (data.length % 2))) : undefined;
      return { durationS: data.length / frameBytes / fmt.rate, samples };
    }
    at += 8 + size + (size & 1);
  }
  return undefined;
}

function answerBody(step: Extract<PrerecordedStep, { kind: 'answer' }>, query: URLSearchParams, durationS: number, body: Buffer): string {
  const words = step.transcript.split(/\s+/).filter((w) => w !== '');
  const each = words.length > 0 ? durationS / words.length : 0;
  const channel: Record<string, unknown> = {
    alternatives: [{
      transcript: step.transcript,
      confidence: words.length > 0 ? 0.98 : 0,
      words: words.map((w, i) => ({ word: w.toLowerCase().replace(/[^\p{L}\p{N}']/gu, ''), start: i * each, end: (i + 1) * each, confidence: 0.98, punctuated_word: w })),
    }],
  };
  if (query.get('detect_language') === 'true') {
    channel.detected_language = step.detectedLanguage ?? 'en';
    channel.language_confidence = 0.97;
  }
  return JSON.stringify({
    metadata: {
      transaction_key: 'deprecated',
      request_id: randomUUID(),
      sha256: createHash('sha256').update(body).digest('hex'),
      created: new Date().toISOString(),
      duration: durationS,
      channels: 1,
      models: [MODEL_UUID],
      model_info: { [MODEL_UUID]: { name: `general-${query.get('model') ?? 'base'}`, version: '2025-01-01.0', arch: query.get('model') ?? 'base' } },
    },
    results: { channels: [channel] },
  });
}

/**
 * Adds `POST /v1/listen` to the fake's app; `apiKey` null accepts any `Token` credential; `record` false keeps no
 * request (long bench runs).
 */
export function attachPrerecorded(app: uWS.TemplatedApp, apiKey: string | null, record = true): FakePrerecorded {
  const queue: PrerecordedStep[] = [];
  const held = new Set<uWS.HttpResponse>();
  const fake: FakePrerecorded = {
    requests: [],
    fallback: { kind: 'answer', transcript: '' },
    script: (...steps) => void queue.push(...steps),
    close() {
      for (const res of held) res.close();
      held.clear();
    },
  };
  app.post('/v1/listen', (res, req) => {
    const headers: Record<string, string> = {};
    req.forEach((k, v) => (headers[k] = v));
    const query = new URLSearchParams(req.getQuery() ?? '');
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
      held.delete(res);
    });
    const chunks: Buffer[] = [];
    res.onData((ab, last) => {
      chunks.push(Buffer.from(new Uint8Array(ab).slice()));
      if (!last) return;
      const body = Buffer.concat(chunks);
      const seen: PrerecordedRequest = { query, contentType: headers['content-type'], bytes: body.length, durationS: undefined, samples: undefined, status: 0 };
      if (record) fake.requests.push(seen);
      const send = (status: number, json: string, extra: Record<string, string> = {}): void => {
        seen.status = status;
        if (aborted) return;
        res.cork(() => {
          res.writeStatus(`${status} ${status === 200 ? 'OK' : 'Error'}`).writeHeader('content-type', 'application/json');
          for (const [k, v] of Object.entries(extra)) res.writeHeader(k, v);
          res.end(json);
        });
      };
      const refuse = (status: number, errMsg?: string): void => {
        const r = refusalOf(status, errMsg === undefined ? {} : { errMsg });
        send(status, r.body, { 'dg-request-id': r.headers['dg-request-id']! });
      };
      const cred = credential(headers);
      if (cred.key === undefined || (apiKey !== null && cred.key !== apiKey)) return refuse(401);
      const checked = checkListenQuery(query);
      if (!checked.ok) return refuse(400, checked.message);
      if (body.length === 0) return refuse(400, 'Bad Request: Payload cannot be empty.');
      const o = checked.options;
      if (o.encoding === undefined) {
        const wav = readWav(body);
        if (wav === undefined) return refuse(400, 'Bad Request: failed to process audio: corrupt or unsupported data');
        seen.durationS = wav.durationS;
        seen.samples = wav.samples;
      } else if (o.bytesPerSecond !== null) {
        seen.durationS = body.length / o.bytesPerSecond;
        if (o.encoding === 'linear16' && o.channels === 1) seen.samples = new Int16Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.length - (body.length % 2)));
      }
      const step = queue.shift() ?? fake.fallback;
      switch (step.kind) {
        case 'hold':
          if (!aborted) held.add(res);
          return;
        case 'reject':
          return refuse(step.status, step.errMsg);
        case 'garbage':
          return send(200, '<html>upstream proxy page</html>');
        case 'answer':
          return send(200, answerBody(step, query, seen.durationS ?? 0, body));
      }
    });
  });
  return fake;
}
