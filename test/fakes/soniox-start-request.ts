// How the fake Soniox server checks a start request (the first text frame), as the provider documents it.
import type { SessionContext } from './soniox-session.js';

/** One error frame's worth: code, stable type, human message. */
export type Problem = { code: number; type: string; message: string };

export const BYTES_PER_SAMPLE: Record<string, number> = {
  pcm_s16le: 2, pcm_s16be: 2, pcm_s32le: 4, pcm_s32be: 4, pcm_f32le: 4, pcm_f32be: 4, mulaw: 1, alaw: 1,
};

/** Checks the start request as the provider does; `bytesPerMs` of audio when valid. */
export function checkStartRequest(cfg: unknown, key: string | undefined, ctx: Pick<SessionContext, 'apiKey' | 'models' | 'languages'>): Problem | { bytesPerMs: number } {
  const bad = (message: string, type = 'invalid_request'): Problem => ({ code: 400, type, message });
  if (!cfg || typeof cfg !== 'object' || Array.isArray(cfg)) return bad('Start request must be a JSON object.');
  const c = cfg as Record<string, unknown>;
  const apiKey = key ?? c.api_key;
  if (typeof apiKey !== 'string' || apiKey !== ctx.apiKey) return { code: 401, type: 'unauthenticated', message: 'Invalid API key.' };
  if (typeof c.model !== 'string' || !ctx.models.includes(c.model)) return bad('Invalid model specified.', 'model_not_available');
  const format = c.audio_format;
  if (typeof format !== 'string') return bad('audio_format is required.');
  const width = BYTES_PER_SAMPLE[format];
  if (width === undefined) return bad(`fake server models raw audio formats only, got ${format}.`);
  const rate = c.sample_rate;
  const channels = c.num_channels;
  if (!Number.isInteger(rate) || (rate as number) < 2000 || (rate as number) > 96000) return bad('sample_rate is required for raw audio formats (2000 to 96000).');
  if (!Number.isInteger(channels) || (channels as number) < 1 || (channels as number) > 8) return bad('num_channels is required for raw audio formats (1 to 8).');
  for (const flag of ['enable_speaker_diarization', 'enable_language_identification', 'enable_endpoint_detection']) {
    if (c[flag] !== undefined && typeof c[flag] !== 'boolean') return bad(`${flag} must be a boolean.`);
  }
  const hints = c.language_hints;
  if (hints !== undefined) {
    if (!Array.isArray(hints)) return bad('language_hints must be an array of strings.');
    for (const h of hints) if (typeof h !== 'string' || !ctx.languages.has(h)) return bad(`Invalid language hint: ${String(h)}.`);
  }
  return { bytesPerMs: ((rate as number) * (channels as number) * width) / 1000 };
}
