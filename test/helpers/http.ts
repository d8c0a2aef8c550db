// A minimal HTTP client for tests: one connection per request (no keep-alive), so nothing lingers after a test.
import http from 'node:http';
import net from 'node:net';

export interface TestResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: any;
}

export interface TestRequest {
  method?: string;
  headers?: Record<string, string>;
  /** Objects are sent as JSON; strings and buffers as they are. */
  body?: unknown;
  /** Send the body in chunks without a content-length (chunked transfer encoding). */
  chunked?: boolean;
}

export function request(base: string, path: string, opts: TestRequest = {}): Promise<TestResponse> {
  const url = new URL(path, base);
  let payload: Buffer | undefined;
  if (opts.body !== undefined) {
    payload = Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body));
  }
  const headers: Record<string, string> = { ...opts.headers };
  if (payload && !opts.chunked) headers['content-length'] ??= String(payload.length);
  if (payload && !headers['content-type']) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (payload && opts.chunked) {
      const half = Math.ceil(payload.length / 2);
      req.write(payload.subarray(0, half));
      req.end(payload.subarray(half));
    } else {
      req.end(payload);
    }
  });
}

export const bearer = (credential: string): Record<string, string> => ({ authorization: `Bearer ${credential}` });

/**
 * Sends only a request's head (`head` without the blank line that ends it) over a raw socket and answers the
 * response head: for answers a server must give before the body, such as 413 for a declared length.
 */
export function headOnly(port: number, head: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(`${head}\r\n\r\n`));
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n\r\n')) {
        sock.destroy();
        resolve(buf);
      }
    });
    sock.on('error', reject);
  });
}
