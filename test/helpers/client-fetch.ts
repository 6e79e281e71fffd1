import type { FastifyInstance } from 'fastify';

/** One request a published browser client made through fetch. */
export interface ClientCall {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** The clients build https:// and wss:// URLs; the server under test is plain HTTP (TLS is the proxy's): only the scheme changes. */
export const plainUrl = (url: string) => url.replace(/^https:/, 'http:').replace(/^wss:/, 'ws:');

/**
 * Puts the app on a loopback port and points the global fetch (which the published in-app client
 * uses) at it, recording every call into `calls`. Answers the host and a restore for afterAll.
 */
export async function routeClientFetch(app: FastifyInstance, calls: ClientCall[]): Promise<{ host: string; realFetch: typeof fetch; restore: () => void }> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  const realFetch = globalThis.fetch;
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    calls.push({ method: init?.method ?? 'GET', url, headers: { ...(init?.headers as Record<string, string>) }, body: init?.body as string | undefined });
    return realFetch(plainUrl(url), init);
  });
  return { host: `127.0.0.1:${address.port}`, realFetch, restore: () => void (globalThis.fetch = realFetch) };
}
