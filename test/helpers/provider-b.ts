// Test rig for the provider_b engine: a manual clock and scheduler shared with the fake Soniox server, captured logs.
import type { Test } from 'tap';
import { ManualClock } from '../../engine/clock.js';
import { createLogger } from '../../engine/logger.js';
import { Scheduler } from '../../engine/scheduler.js';
import { ProviderBEngine, type ProviderBEngineOptions } from '../../engine/stt/provider-b/engine.js';
import type { SttFailure, SttSegment, SttStream } from '../../engine/stt/types.js';
import { FAKE_SONIOX_KEY, startFakeSoniox, type FakeSoniox, type FakeSonioxOptions } from '../fakes/soniox-server.js';

export interface Rig {
  clock: ManualClock;
  scheduler: Scheduler;
  fake: FakeSoniox;
  engine: ProviderBEngine;
  /** Every log line written, as JSON text. */
  logs: string[];
  /** Moves the clock and runs what fell due. */
  advance(ms: number): Promise<void>;
}

export async function rig(t: Test, fakeOpts: FakeSonioxOptions = {}, engineOpts: Partial<ProviderBEngineOptions> = {}): Promise<Rig> {
  const clock = new ManualClock();
  const scheduler = new Scheduler({ clock, resolutionMs: 0 });
  const fake = await startFakeSoniox({ clock, scheduler, ...fakeOpts });
  const logs: string[] = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(line) });
  const engine = new ProviderBEngine({ url: fake.url, apiKey: FAKE_SONIOX_KEY, clock, scheduler, logger, ...engineOpts });
  t.teardown(async () => {
    await engine.close();
    await fake.close();
    scheduler.close();
  });
  return {
    clock, scheduler, fake, engine, logs,
    async advance(ms) {
      clock.advance(ms);
      await scheduler.tick();
    },
  };
}

export const openOpts = (sessionId = 's1', language = 'en') => ({ language, sampleRateHz: 16000 as const, sessionId });

/** `ms` of 16 kHz PCM whose samples encode their position in the stream (from `fromSample`), so slices are checkable. */
export function ramp(ms: number, fromSample = 0): Int16Array {
  return new Int16Array(16 * ms).map((_, i) => ((fromSample + i) % 30000) - 15000);
}

/** Writes `totalMs` in `chunkMs` pieces continuing the ramp; returns the next sample index. */
export function feed(stream: SttStream, totalMs: number, fromSample = 0, chunkMs = 100): number {
  let at = fromSample;
  for (let done = 0; done < totalMs; done += chunkMs) {
    const piece = ramp(Math.min(chunkMs, totalMs - done), at);
    stream.write(piece);
    at += piece.length;
  }
  return at;
}

/** Collects a stream's events in order. */
export function collect(stream: SttStream): { segments: SttSegment[]; failures: SttFailure[]; order: string[] } {
  const out = { segments: [] as SttSegment[], failures: [] as SttFailure[], order: [] as string[] };
  stream.on('segments', (s) => {
    out.segments.push(...s);
    out.order.push('segments');
  });
  stream.on('failure', (f) => {
    out.failures.push(f);
    out.order.push('failure');
  });
  return out;
}
