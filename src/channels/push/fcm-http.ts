import { type Dispatcher, request } from 'undici';
import { retryAfterMs as readRetryAfter } from '../../net/retry-after.js';
import { SafeFetchError, pinnedAgent, resolvePublicAddress } from '../../net/ssrf.js';

/** A small HTTP exchange with Google's endpoints: status, headers and at most `maxBytes` of body. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export type TransportFailure = 'TIMEOUT' | 'NETWORK' | 'BLOCKED' | 'TOO_LARGE';

export class TransportError extends Error {
  constructor(
    readonly kind: TransportFailure,
    message: string,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

export interface PostOptions {
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  maxBytes?: number;
  /** For user-given URLs: resolve, check and pin the address (src/net/ssrf.ts). */
  guard?: { allowPrivateNetworks: boolean };
  /** A shared keep-alive agent for trusted (configured) URLs. */
  dispatcher?: Dispatcher;
}

/** POST without following redirects. Non-2xx answers are returned, transport failures thrown. */
export async function post(url: string, options: PostOptions): Promise<HttpAnswer> {
  const maxBytes = options.maxBytes ?? 256 * 1024;
  let dispatcher = options.dispatcher;
  let owned: ReturnType<typeof pinnedAgent> | undefined;
  if (options.guard) {
    const target = new URL(url);
    try {
      const pinned = await resolvePublicAddress(target.hostname, { allowPrivateNetworks: options.guard.allowPrivateNetworks });
      owned = pinnedAgent(pinned, options.timeoutMs);
      dispatcher = owned;
    } catch (err) {
      if (err instanceof SafeFetchError) {
        throw new TransportError(err.code === 'ADDRESS_BLOCKED' ? 'BLOCKED' : 'NETWORK', err.message);
      }
      throw err;
    }
  }
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'user-agent': 'Clarion', ...options.headers },
      body: options.body,
      signal,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      ...(dispatcher ? { dispatcher } : {}),
    });
    res.body.on('error', () => {});
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) {
        res.body.destroy();
        throw new TransportError('TOO_LARGE', `The answer of ${new URL(url).host} is over ${maxBytes} bytes.`);
      }
      chunks.push(chunk as Buffer);
    }
    return { status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks, size).toString('utf8') };
  } catch (err) {
    if (err instanceof TransportError) throw err;
    const e = err as { name?: string; code?: string; message?: string };
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || /TIMEOUT/.test(e.code ?? '')) {
      throw new TransportError('TIMEOUT', `${new URL(url).host} did not answer within ${options.timeoutMs} ms.`);
    }
    throw new TransportError('NETWORK', `Could not reach ${new URL(url).host}: ${e.code ? `${e.code} ` : ''}${e.message ?? String(err)}`);
  } finally {
    owned?.destroy().catch(() => {});
  }
}

/** Retry-After in milliseconds (delay-seconds or an HTTP date, src/net/retry-after.ts), or undefined. */
export function retryAfterMs(headers: HttpAnswer['headers'], now: Date): number | undefined {
  return readRetryAfter(headers['retry-after'], now) ?? undefined;
}
