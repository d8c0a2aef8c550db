// The fake Deepgram's handshake answers: who is calling (`Token <key>`), and the body of a refusal as Deepgram words it.
import { randomUUID } from 'node:crypto';

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found', 408: 'Request Timeout',
  429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

const ERR_CODE: Record<number, [string, string]> = {
  401: ['INVALID_AUTH', 'Invalid credentials.'],
  402: ['ASR_PAYMENT_REQUIRED', 'Project does not have enough credits for an ASR request.'],
  403: ['INSUFFICIENT_PERMISSIONS', 'You do not have permission to access the requested resource.'],
  429: ['TOO_MANY_REQUESTS', 'Too many requests. Please try again later.'],
};

/** Reads `Token <key>` from the Authorization header, or from the `token, <key>` subprotocols browsers use. */
export function credential(headers: Record<string, string>): { key: string | undefined; protocol: string } {
  const protocols = (headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  const m = /^Token\s+(\S+)$/i.exec(headers.authorization ?? '');
  // The server picks one of the requested subprotocols (none requested: none answered).
  if (m) return { key: m[1], protocol: protocols[0] ?? '' };
  if (protocols[0]?.toLowerCase() === 'token' && protocols[1]) return { key: protocols[1], protocol: 'token' };
  return { key: undefined, protocol: '' };
}

/** A refused upgrade: status line, Deepgram's `dg-request-id`/`dg-error` headers, and its `{err_code, err_msg, request_id}` body. */
export function refusalOf(status: number, extra: { retryAfter?: string; errCode?: string; errMsg?: string } = {}): { statusLine: string; headers: Record<string, string>; body: string } {
  const [code, msg] = ERR_CODE[status] ?? [status >= 500 ? 'INTERNAL_SERVER_ERROR' : 'Bad Request', STATUS_TEXT[status] ?? 'Error'];
  const requestId = randomUUID();
  const headers: Record<string, string> = { 'content-type': 'application/json', 'dg-request-id': requestId, 'dg-error': extra.errMsg ?? msg };
  if (extra.retryAfter !== undefined) headers['retry-after'] = extra.retryAfter;
  return {
    statusLine: `${status} ${STATUS_TEXT[status] ?? 'Error'}`,
    headers,
    body: JSON.stringify({ err_code: extra.errCode ?? code, err_msg: extra.errMsg ?? msg, request_id: requestId }),
  };
}
