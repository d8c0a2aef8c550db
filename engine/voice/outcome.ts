// Voice-message outcomes: the closed vocabulary's failures as HTTP answers with one fixed, public-safe body.
import { EngineError, type ErrorCode } from '../errors.js';
import { Outcome } from '../protocol.js';

/** The outcomes a voice message can fail with. */
export type FailureOutcome = Exclude<Outcome, typeof Outcome.SUCCESS | typeof Outcome.EXPECTED_SILENCE>;

/** Provider labels a failure may name; anything else is reported as `unknown`. */
const PROVIDERS: ReadonlySet<string> = new Set(['provider_a', 'provider_b', 'local']);
export const providerLabel = (name: string | undefined): string => (name !== undefined && PROVIDERS.has(name) ? name : 'unknown');

interface FailureDef {
  /** The body's `error`, as the compatible system names it. */
  error: string;
  code: ErrorCode;
  message: string;
}

/** Per outcome: the body's `error` and default message; status and `retryable` come from the error catalogue. */
const FAILURES: Record<FailureOutcome, FailureDef> = {
  [Outcome.INVALID_INPUT]: { error: 'stt_invalid_input', code: 'ENG_ERR_VOICE_INVALID_INPUT', message: 'The audio cannot be decoded or the request is not valid.' },
  [Outcome.EMPTY_UNEXPECTED]: { error: 'stt_empty_unexpected', code: 'ENG_ERR_VOICE_EMPTY_UNEXPECTED', message: 'Speech was detected but the transcription came back empty.' },
  [Outcome.UPSTREAM_ERROR]: { error: 'stt_upstream_error', code: 'ENG_ERR_VOICE_UPSTREAM_ERROR', message: 'The transcription provider failed.' },
  [Outcome.CONFIG_ERROR]: { error: 'stt_provider_configuration_error', code: 'ENG_ERR_VOICE_CONFIG_ERROR', message: 'No transcription provider on this server can serve the request.' },
  [Outcome.TIMEOUT]: { error: 'stt_timeout', code: 'ENG_ERR_VOICE_TIMEOUT', message: 'The transcription provider did not answer in time.' },
};

/** The body of a failed voice message: these five fields and nothing else. */
export interface VoiceFailureBody {
  error: string;
  outcome: FailureOutcome;
  provider: string;
  retryable: boolean;
  message: string;
}

/**
 * A failed voice message. `message` is one of this service's own sentences (a rule the upload broke, or the
 * outcome's default), never a provider's body, an exception's text or anything from the upload.
 */
export class VoiceFailure extends Error {
  readonly body: VoiceFailureBody;

  constructor(outcome: FailureOutcome, provider: string | undefined, message?: string) {
    const def = FAILURES[outcome];
    super(message ?? def.message);
    this.name = 'VoiceFailure';
    const probe = new EngineError(def.code);
    this.body = { error: def.error, outcome, provider: providerLabel(provider), retryable: probe.retryable, message: message ?? def.message };
  }

  get outcome(): FailureOutcome {
    return this.body.outcome;
  }

  /** The HTTP answer: the outcome's status, the body under `detail` (as the compatible system puts it), the code in `x-error-code`. */
  toEngineError(headers?: Record<string, string>): EngineError {
    return new EngineError(FAILURES[this.body.outcome].code, {}, { detail: this.body, ...(headers ? { headers } : {}) });
  }
}
