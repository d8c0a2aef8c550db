// The fake Deepgram's check of `/v1/listen` query options, answering 400 where the live API refuses before the upgrade.
//
// Rules from Deepgram's public docs (Encoding, Sample Rate, Keyterm Prompting, Models & Languages) and the official
// SDK's typed options: `encoding` is one of the documented codecs and needs `sample_rate` for raw audio (AMR needs
// 8000/16000); booleans are `true`/`false`; `endpointing` is false or whole milliseconds; `utterance_end_ms` needs
// `interim_results=true`; `keyterm` is Nova-3 only and Nova-3 refuses `keywords`; an unknown model, or a language the
// model does not serve, is "No such model/language/tier combination found". Unknown parameters are ignored (recorded).
import { NOVA3_LANGUAGES } from '../../engine/stt/provider-a/languages.js';

/** Codecs Deepgram accepts for raw audio, with bytes per sample where the audio length can be derived. */
const ENCODINGS: Record<string, number | null> = {
  linear16: 2,
  linear32: 4,
  alaw: 1,
  mulaw: 1,
  flac: null,
  'amr-nb': null,
  'amr-wb': null,
  opus: null,
  'ogg-opus': null,
  speex: null,
  g729: null,
};

const MODELS = new Set([
  'nova-3', 'nova-3-general', 'nova-3-medical',
  'nova-2', 'nova-2-general', 'nova-2-meeting', 'nova-2-finance', 'nova-2-conversationalai', 'nova-2-voicemail',
  'nova-2-video', 'nova-2-medical', 'nova-2-drivethru', 'nova-2-automotive',
  'nova', 'nova-general', 'nova-phonecall', 'nova-medical',
  'enhanced', 'enhanced-general', 'enhanced-meeting', 'enhanced-phonecall', 'enhanced-finance',
  'base', 'meeting', 'phonecall', 'finance', 'conversationalai', 'voicemail', 'video',
]);


const BOOLEANS = [
  'diarize', 'punctuate', 'smart_format', 'interim_results', 'profanity_filter', 'filler_words', 'multichannel',
  'numerals', 'no_delay', 'vad_events', 'dictation', 'detect_entities', 'mip_opt_out', 'measurements',
];

export interface ListenOptions {
  model: string;
  language: string;
  encoding: string | undefined;
  sampleRate: number | undefined;
  channels: number;
  diarize: boolean;
  /** punctuate or smart_format: results carry punctuated_word. */
  punctuated: boolean;
  interimResults: boolean;
  /** Bytes per second of audio when the encoding says it (raw PCM/G.711), else null. */
  bytesPerSecond: number | null;
  /** Bytes of one sample of every channel (1 when unknown). */
  frameBytes: number;
}

export type QueryCheck = { ok: true; options: ListenOptions } | { ok: false; message: string };

const isNova3 = (model: string) => model === 'nova-3' || model.startsWith('nova-3-');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function wholeNumber(v: string): number | undefined {
  return /^\d{1,9}$/.test(v) ? Number(v) : undefined;
}

/** Checks the query of an upgrade request the way Deepgram does before answering 101. */
export function checkListenQuery(q: URLSearchParams): QueryCheck {
  const bad = (message: string): QueryCheck => ({ ok: false, message });
  for (const name of BOOLEANS) {
    const v = q.get(name);
    if (v !== null && v !== 'true' && v !== 'false') return bad(`Invalid value for ${name}: expected true or false`);
  }
  const model = q.get('model') ?? 'base';
  if (!MODELS.has(model) && !UUID.test(model)) return bad('No such model/language/tier combination found.');
  const language = q.get('language') ?? 'en';
  if (isNova3(model) ? !NOVA3_LANGUAGES.has(language) : !/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$|^multi$/.test(language)) {
    return bad('No such model/language/tier combination found.');
  }
  const encoding = q.get('encoding') ?? undefined;
  if (encoding !== undefined && !(encoding in ENCODINGS)) return bad(`Invalid encoding: ${encoding.slice(0, 32)}`);
  const rawRate = q.get('sample_rate');
  const sampleRate = rawRate === null ? undefined : wholeNumber(rawRate);
  if (rawRate !== null && (sampleRate === undefined || sampleRate < 1000 || sampleRate > 192000)) return bad('Invalid sample_rate');
  if (encoding !== undefined && encoding !== 'ogg-opus' && sampleRate === undefined) return bad('sample_rate is required when encoding is set for raw audio');
  if (encoding === undefined && sampleRate !== undefined) return bad('encoding is required when sample_rate is set');
  if (encoding === 'amr-nb' && sampleRate !== 8000) return bad('amr-nb requires sample_rate=8000');
  if (encoding === 'amr-wb' && sampleRate !== 16000) return bad('amr-wb requires sample_rate=16000');
  const rawChannels = q.get('channels');
  const channels = rawChannels === null ? 1 : wholeNumber(rawChannels);
  if (channels === undefined || channels < 1 || channels > 64) return bad('Invalid channels');
  const endpointing = q.get('endpointing');
  if (endpointing !== null && endpointing !== 'false' && endpointing !== 'true' && wholeNumber(endpointing) === undefined) return bad('Invalid endpointing');
  const utteranceEnd = q.get('utterance_end_ms');
  if (utteranceEnd !== null) {
    if (wholeNumber(utteranceEnd) === undefined) return bad('Invalid utterance_end_ms');
    if (q.get('interim_results') !== 'true') return bad('utterance_end_ms requires interim_results=true');
  }
  if (q.getAll('keyterm').length > 0 && !isNova3(model)) return bad('Keyterm prompting is only available with Nova-3 models');
  if (q.getAll('keywords').some((k) => k.trim() !== '') && isNova3(model)) return bad('Keywords are not supported for Nova-3. Please use `keyterm` instead.');
  const bytesPerSample = encoding === undefined ? null : ENCODINGS[encoding]!;
  return {
    ok: true,
    options: {
      model,
      language,
      encoding,
      sampleRate,
      channels,
      diarize: q.get('diarize') === 'true',
      punctuated: q.get('punctuate') === 'true' || q.get('smart_format') === 'true',
      interimResults: q.get('interim_results') === 'true',
      bytesPerSecond: bytesPerSample === null || sampleRate === undefined ? null : bytesPerSample * sampleRate * channels,
      frameBytes: (bytesPerSample ?? 1) * (bytesPerSample === null ? 1 : channels),
    },
  };
}
