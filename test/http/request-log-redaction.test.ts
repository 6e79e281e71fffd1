import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildServices } from '../../src/services.js';
import { buildDeps, createLogger } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { redactUrl } from '../../src/http/request-logger.js';
import { Secrets } from '../../src/secrets.js';
import { testConfig } from '../helpers/context.js';
import { eventually } from '../helpers/wait.js';
import { type TestStorage, createTestStorage } from '../helpers/storage.js';

/** The fields of a request log line these tests read. */
type LoggedLine = { msg?: string; req?: Record<string, unknown> };

const HASH = 'c2VjcmV0LWhhc2gtb2YtdGhlLXVzZXI';

describe('request logs at info level', () => {
  const lines: string[] = [];
  let app: App;
  let storage: TestStorage;
  let dataDir: string;

  beforeAll(async () => {
    storage = await createTestStorage('sqlite');
    const config = testConfig();
    dataDir = config.dataDir;
    const stream = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const deps = buildDeps(config, { storage, logger: createLogger({ logLevel: 'info' }, stream), secrets: new Secrets(randomBytes(32)) });
    app = await buildApp(deps, buildServices(deps));
    await app.ready();
  });

  afterAll(async () => {
    await app.close();
    await storage.destroy();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it.each([
    ['the in-app websocket URL', `/?envId=client-1&userId=u-1&userIdHash=${HASH}`, 'userIdHash'],
    ['the /ws websocket URL', `/ws?envId=client-1&userId=u-1&hashedUserId=${HASH}`, 'hashedUserId'],
    ['a REST query string', `/users/u-1?token=${HASH}&limit=5`, 'token'],
    ['an OAuth callback', `/anything?state=s1&code=${HASH}`, 'code'],
    ['a percent-encoded name', `/anything?access%5Ftoken=${HASH}`, 'access%5Ftoken'],
  ])('never carry the credential in %s', async (_name, url, param) => {
    const before = lines.length;
    await app.inject({ method: 'GET', url });
    const logged = lines.slice(before).join('');
    expect(logged).toContain('request completed');
    expect(logged).not.toContain(HASH);
    expect(logged).toContain(`${param}=[REDACTED]`);
  });

  it('never carry the credential of a real websocket upgrade', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const before = lines.length;
    const ws = new WebSocket(`${address.replace('http', 'ws')}/?envId=client-1&userId=u-1&userIdHash=${HASH}`);
    await new Promise<void>((resolve) => {
      ws.on('close', () => resolve());
      ws.on('error', () => resolve());
    });
    await eventually(async () => lines.slice(before).some((l) => l.includes('websocket upgrade')) || undefined, 5000, 'the upgrade logged');
    const logged = lines.slice(before).join('');
    expect(logged).not.toContain(HASH);
    expect(logged).toContain('userIdHash=[REDACTED]');
  });

  it('keeps the other parameters readable', async () => {
    const before = lines.length;
    await app.inject({ method: 'GET', url: `/?envId=client-1&userId=u-1&userIdHash=${HASH}` });
    const completed = lines.slice(before).map((l) => JSON.parse(l) as LoggedLine).find((l) => l.msg === 'request completed');
    expect(completed?.req?.url).toBe('/?envId=client-1&userId=u-1&userIdHash=[REDACTED]');
    // One line per request, with what Fastify's two lines had.
    expect(completed).toMatchObject({ trackingId: expect.any(String), res: { statusCode: expect.any(Number) }, responseTime: expect.any(Number), req: { method: 'GET' } });
    expect(lines.slice(before).filter((l) => l.includes('"req"')), lines.slice(before).join('')).toHaveLength(1);
  });

  it('names the client address and port, and carries no header', async () => {
    // Listening already when the websocket test ran first.
    const address = app.server.listening ? `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` : await app.listen({ port: 0, host: '127.0.0.1' });
    const before = lines.length;
    await fetch(`${address}/status`, { headers: { authorization: 'Bearer clarion_sk_secret-of-the-caller', cookie: 'session=secret-cookie' } });
    await eventually(async () => lines.slice(before).some((l) => l.includes('request completed')) || undefined, 5000, 'the request logged');
    const logged = lines.slice(before).join('');
    const completed = lines.slice(before).map((l) => JSON.parse(l) as LoggedLine).find((l) => l.msg === 'request completed');
    expect(completed?.req).toMatchObject({ method: 'GET', url: '/status', remoteAddress: '127.0.0.1', remotePort: expect.any(Number) });
    expect(logged).not.toContain('secret-of-the-caller');
    expect(logged).not.toContain('secret-cookie');
  });
});

describe('redactUrl', () => {
  it.each([
    ['/users/u-1', '/users/u-1'],
    ['/logs?limit=5&cursor=abc', '/logs?limit=5&cursor=abc'],
    ['/x?key=k&secret=s&signature=g&access_token=t&code=c&apiKey=a', '/x?key=[REDACTED]&secret=[REDACTED]&signature=[REDACTED]&access_token=[REDACTED]&code=[REDACTED]&apiKey=[REDACTED]'],
    ['/x?userIdHash', '/x?userIdHash'],
    ['/x?%E0%A4%A=1&token=2', '/x?%E0%A4%A=1&token=[REDACTED]'],
  ])('%s -> %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});
