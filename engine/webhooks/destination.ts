// Where the service may send an outbound request (webhooks, an app's setup check): http(s) URLs without credentials
// whose host resolves only to public addresses. Checked when a URL is saved and again, on a fresh resolution, when a
// request is made; the request then connects to the address that was checked, so a name that changes its answer in
// between (DNS rebinding) reaches nothing it should not. Redirects are never followed.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';

/** Why a destination is refused; each rule is named in the refusal's message and in docs/webhooks.md. */
export type DestinationRule =
  | 'scheme'
  | 'credentials'
  | 'host'
  | 'unresolvable'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'cgnat'
  | 'unspecified'
  | 'multicast'
  | 'reserved'
  | 'metadata';

const RULE_TEXT: Record<DestinationRule, string> = {
  scheme: 'only http and https URLs are accepted',
  credentials: 'the URL must not carry a user name or password',
  host: 'the URL has no valid host',
  unresolvable: 'the host name does not resolve',
  loopback: 'the host resolves to a loopback address',
  private: 'the host resolves to a private network address',
  'link-local': 'the host resolves to a link-local address',
  cgnat: 'the host resolves to a carrier-grade NAT address (100.64.0.0/10)',
  unspecified: 'the host resolves to an unspecified address',
  multicast: 'the host resolves to a multicast or broadcast address',
  reserved: 'the host resolves to a reserved address',
  metadata: 'the host is a cloud metadata endpoint',
};

/** A refused destination. The message names the rule and never quotes the URL (it may hold a token). */
export class DestinationRefused extends Error {
  constructor(readonly rule: DestinationRule) {
    super(`Webhook destination refused: ${RULE_TEXT[rule]} (${rule})`);
    this.name = 'DestinationRefused';
  }
}

/** Rules that WEBHOOK_ALLOW_PRIVATE lifts; metadata and the rest never are. */
const PRIVATE_RULES: ReadonlySet<DestinationRule> = new Set(['loopback', 'private', 'link-local', 'cgnat', 'unspecified']);

function list(entries: readonly [string, number, 'ipv4' | 'ipv6'][]): net.BlockList {
  const b = new net.BlockList();
  for (const [a, prefix, family] of entries) b.addSubnet(a, prefix, family);
  return b;
}

// Ordered: the first list that holds an address names its rule. BlockList matches IPv4-mapped IPv6 addresses
// (::ffff:10.0.0.1) against the IPv4 subnets too.
const RULES: readonly [DestinationRule, net.BlockList][] = [
  [
    'metadata',
    (() => {
      const b = new net.BlockList();
      b.addAddress('169.254.169.254', 'ipv4'); // AWS, GCP, Azure, OpenStack, DigitalOcean…
      b.addAddress('169.254.170.2', 'ipv4'); // ECS task credentials
      b.addAddress('100.100.100.200', 'ipv4'); // Alibaba Cloud
      b.addAddress('fd00:ec2::254', 'ipv6'); // AWS over IPv6
      return b;
    })(),
  ],
  ['unspecified', list([['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']])],
  ['loopback', list([['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']])],
  ['private', list([['10.0.0.0', 8, 'ipv4'], ['172.16.0.0', 12, 'ipv4'], ['192.168.0.0', 16, 'ipv4'], ['fc00::', 7, 'ipv6']])],
  ['link-local', list([['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']])],
  ['cgnat', list([['100.64.0.0', 10, 'ipv4']])],
  ['multicast', list([['224.0.0.0', 4, 'ipv4'], ['255.255.255.255', 32, 'ipv4'], ['ff00::', 8, 'ipv6']])],
  [
    'reserved',
    list([
      ['192.0.0.0', 24, 'ipv4'], // IETF protocol assignments
      ['192.0.2.0', 24, 'ipv4'], // documentation
      ['198.18.0.0', 15, 'ipv4'], // benchmarking
      ['198.51.100.0', 24, 'ipv4'],
      ['203.0.113.0', 24, 'ipv4'],
      ['240.0.0.0', 4, 'ipv4'], // future use
      ['64:ff9b::', 96, 'ipv6'], // NAT64: could reach any IPv4 address, private ones included
      ['64:ff9b:1::', 48, 'ipv6'],
      ['2001:db8::', 32, 'ipv6'], // documentation
      ['2002::', 16, 'ipv6'], // 6to4 embeds an IPv4 address
      ['100::', 64, 'ipv6'], // discard
    ]),
  ],
];

/** Host names of metadata services, refused before any resolution (lower case, no trailing dot). */
const METADATA_HOSTS: ReadonlySet<string> = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal', 'metadata.azure.internal']);

/** The rule an address breaks, or undefined for a public address. */
export function classifyAddress(address: string): DestinationRule | undefined {
  const family = net.isIP(address);
  if (family === 0) return 'host';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [rule, blocks] of RULES) if (blocks.check(address, type)) return rule;
  return undefined;
}

export interface ResolvedAddress {
  readonly address: string;
  /** 4 or 6. */
  readonly family: number;
}

/** Resolves a host name to every address it has (tests inject their own). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** A URL that passed every rule, and the one address a request to it must connect to. */
export interface CheckedDestination {
  readonly url: URL;
  readonly address: string;
  readonly family: number;
}

export interface DestinationGuardOptions {
  /** Lift the loopback, private, link-local, CGNAT and unspecified rules (WEBHOOK_ALLOW_PRIVATE). */
  readonly allowPrivate: boolean;
  /** @defaultValue the system resolver (getaddrinfo) */
  readonly resolve?: Resolver;
}

export class DestinationGuard {
  readonly #allowPrivate: boolean;
  readonly #resolve: Resolver;

  constructor(opts: DestinationGuardOptions) {
    this.#allowPrivate = opts.allowPrivate;
    this.#resolve = opts.resolve ?? systemResolver;
  }

  /** The rule an address breaks under this guard's setting, or undefined when it may be reached. */
  refusal(address: string): DestinationRule | undefined {
    const rule = classifyAddress(address);
    if (rule === undefined || (this.#allowPrivate && PRIVATE_RULES.has(rule))) return undefined;
    return rule;
  }

  /**
   * Checks a URL's form and resolves its host once, checking every address it has (one bad address refuses the
   * whole name: which one a connection would use is not ours to choose). Throws DestinationRefused.
   */
  async check(raw: string | URL): Promise<CheckedDestination> {
    const url = parseDestination(raw);
    const host = hostOf(url);
    if (METADATA_HOSTS.has(host)) throw new DestinationRefused('metadata');
    let addresses: ResolvedAddress[];
    if (net.isIP(host) !== 0) {
      addresses = [{ address: host, family: net.isIP(host) }];
    } else {
      try {
        addresses = await this.#resolve(host);
      } catch {
        throw new DestinationRefused('unresolvable');
      }
      if (addresses.length === 0) throw new DestinationRefused('unresolvable');
    }
    for (const a of addresses) {
      const rule = this.refusal(a.address);
      if (rule !== undefined) throw new DestinationRefused(rule);
    }
    return { url, address: addresses[0]!.address, family: addresses[0]!.family };
  }

  /**
   * A `lookup` for `http.request`/`http.Agent` that resolves through this guard and hands the connection only a
   * checked address; a refused name fails the connection with DestinationRefused. The request keeps the URL's host
   * name for the Host header and TLS SNI.
   */
  lookup(): LookupFunction {
    return ((hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
      this.check(`http://${net.isIPv6(hostname) ? `[${hostname}]` : hostname}/`).then(
        (d) => (options?.all ? callback(null, [{ address: d.address, family: d.family }]) : callback(null, d.address, d.family)),
        (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
      );
    }) as LookupFunction;
  }
}

/** A `lookup` that answers every name with one address already checked (pins a connection to it). */
export function pinnedLookup(d: Pick<CheckedDestination, 'address' | 'family'>): LookupFunction {
  return ((_hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
    if (options?.all) callback(null, [{ address: d.address, family: d.family }]);
    else callback(null, d.address, d.family);
  }) as LookupFunction;
}

/** Parses and checks a URL's form (scheme, credentials, host); throws DestinationRefused. */
export function parseDestination(raw: string | URL): URL {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    throw new DestinationRefused('host');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new DestinationRefused('scheme');
  if (url.username !== '' || url.password !== '') throw new DestinationRefused('credentials');
  if (hostOf(url) === '') throw new DestinationRefused('host');
  return url;
}

/** The URL's host without IPv6 brackets or a trailing dot, lower case (WHATWG URL already folds IPv4 forms). */
function hostOf(url: URL): string {
  let h = url.hostname.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

export interface GuardedRequest {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: Buffer | string;
  /** Whole request, connect to last byte. */
  readonly timeoutMs: number;
  /** Bytes of the answer kept; the rest is read and dropped. @defaultValue 65536 */
  readonly maxResponseBytes?: number;
}

export interface GuardedResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** At most maxResponseBytes of the answer. */
  readonly body: Buffer;
  /** The address the request connected to. */
  readonly address: string;
}

/**
 * One request to a URL through the guard: resolved and checked now, connected to the checked address, with the
 * URL's host in Host and SNI. A 3xx is returned as it is (never followed). Rejects with DestinationRefused, or the
 * socket's error, or an Error named 'TimeoutError'.
 */
export async function guardedRequest(guard: DestinationGuard, raw: string | URL, opts: GuardedRequest): Promise<GuardedResponse> {
  const dest = await guard.check(raw);
  const limit = opts.maxResponseBytes ?? 65_536;
  const mod = dest.url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(dest.url, { method: opts.method ?? 'GET', headers: opts.headers, lookup: pinnedLookup(dest), agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (c: Buffer) => {
        if (kept >= limit) return;
        const part = c.subarray(0, limit - kept);
        chunks.push(part);
        kept += part.length;
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), address: dest.address });
      });
      res.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    const timer = setTimeout(() => {
      const err = new Error('request timed out');
      err.name = 'TimeoutError';
      req.destroy(err);
    }, opts.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(opts.body);
  });
}
