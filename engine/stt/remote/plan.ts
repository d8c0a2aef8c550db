// How a remote provider's stream sends audio: its message lengths, which the session's codec stream batches its
// decoding by (engine/codec/uplink.ts SendPlan).
import type { SendPlan } from '../../codec/uplink.js';

/** Audio per provider message, in ms: a socket write per 20 ms frame would be the largest cost of a loaded node. */
export const SEND_MS = 100;

/** 20 ms of 16 kHz audio: the shortest message both providers take. */
export const MIN_SEND_SAMPLES = 320;

/** Samples per message for `sendMs` milliseconds of 16 kHz audio; throws outside 20–250 ms (the range both providers take). */
export function sendSamplesOf(sendMs: number): number {
  if (!(sendMs >= 20 && sendMs <= 250)) throw new RangeError('sendMs must be in [20, 250]');
  return Math.round(sendMs * 16);
}

/**
 * A stream's first message length: drawn with `random` between 20 ms and `sendSamples` (RemoteEngineOptions.staggerFirst),
 * so that streams that start together do not complete their messages together; without it, `sendSamples`.
 */
export function firstMessageSamples(sendSamples: number, random: (() => number) | undefined): number {
  return random ? MIN_SEND_SAMPLES + Math.floor(random() * (sendSamples - MIN_SEND_SAMPLES + 1)) : sendSamples;
}

/** One stream's send plan: messages of `sendSamples`, the first drawn with `random`. */
export function sendPlan(sendSamples: number, random: (() => number) | undefined): SendPlan {
  return { messageSamples: sendSamples, firstSamples: firstMessageSamples(sendSamples, random), minSamples: MIN_SEND_SAMPLES };
}
