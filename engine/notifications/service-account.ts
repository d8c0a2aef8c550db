// A Firebase service-account file: the fields the OAuth assertion and the FCM project path need, checked at start.
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface ServiceAccount {
  readonly projectId: string;
  readonly clientEmail: string;
  /** PKCS#8 PEM. */
  readonly privateKey: string;
  readonly tokenUri: string | undefined;
}

/** Reads and checks the file; throws an Error whose message says what is wrong (never the key). */
export function readServiceAccount(file: string): ServiceAccount {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new Error('cannot be read');
  }
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error('is not JSON');
  }
  for (const field of ['project_id', 'client_email', 'private_key'] as const) {
    if (typeof json[field] !== 'string' || json[field] === '') throw new Error(`has no ${field}`);
  }
  try {
    createPrivateKey(json.private_key as string);
  } catch {
    throw new Error('private_key is not a PEM private key');
  }
  return {
    projectId: json.project_id as string,
    clientEmail: json.client_email as string,
    privateKey: json.private_key as string,
    tokenUri: typeof json.token_uri === 'string' ? json.token_uri : undefined,
  };
}
