// The OpenAI SDK, imported when a client first sends: every role imports the modules that may call a model, but a
// node without LLM_BASE_URL never does, and the SDK is ~3.6 MiB of resident memory once loaded.
import type OpenAI from 'openai';

type Sdk = typeof OpenAI;
export type ClientOptions = NonNullable<ConstructorParameters<Sdk>[0]>;

let sdk: Promise<Sdk> | undefined;
/** The SDK once some client loaded it: its error classes, for telling how a request failed. */
let loaded: Sdk | undefined;

/** An OpenAI-compatible client, made on first use. */
export class LazyOpenAI {
  readonly #options: ClientOptions;
  #client: Promise<OpenAI> | undefined;

  constructor(options: ClientOptions) {
    this.#options = options;
  }

  /** The client (the SDK is imported by the first call in the process). */
  client(): Promise<OpenAI> {
    sdk ??= import('openai').then((m) => (loaded = m.default));
    return (this.#client ??= sdk.then((Client) => new Client(this.#options)));
  }
}

/** How a request failed, by the SDK's error classes: a timeout, no connection, or an answer with `status`. */
export function requestFailure(err: unknown): { kind: 'timeout' | 'connection' | 'api'; status: number | undefined } {
  // Only a client throws the SDK's errors, so the SDK is loaded whenever `err` is one.
  if (loaded === undefined) return { kind: 'api', status: undefined };
  const status = err instanceof loaded.APIError ? err.status : undefined;
  if (err instanceof loaded.APIConnectionTimeoutError) return { kind: 'timeout', status };
  if (err instanceof loaded.APIConnectionError) return { kind: 'connection', status };
  return { kind: 'api', status };
}
