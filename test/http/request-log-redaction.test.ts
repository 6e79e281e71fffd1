import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildServices } from '../../src/services.js';
import { buildDeps, createLogging } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { pinoRequestLines, redactUrl } from '../../src/http/request-logger.js';
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
    // createLogging: the request lines the server writes by default (directRequestLines).
    const deps = buildDeps(config, { storage, logging: createLogging({ logLevel: 'info' }, stream), secrets: new Secrets(randomBytes(32)) });
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

describe('request lines written as text', () => {
  const captured = () => {
    const lines: string[] = [];
    const logging = createLogging({ logLevel: 'info' }, { write: (line: string) => void lines.push(line) });
    return { lines, logging, throughPino: pinoRequestLines(logging.logger) };
  };

  it.each([
    ['a request with every field', { id: 'trk-1', method: 'POST', url: `/send?token=${HASH}&x="q"`, host: 'example.test:3000', ip: '127.0.0.1', socket: { remotePort: 50123 } }],
    ['a request without Host or port (inject, HTTP/1.0)', { id: 'trk-2', method: 'GET', url: '/status', ip: '::1', socket: {} }],
  ])('give the line pino gives, field for field and in order: %s', (_name, request) => {
    const { lines, logging, throughPino } = captured();
    logging.requestLines.completed(request, 202, 1.25);
    throughPino.completed(request, 202, 1.25);
    logging.requestLines.upgrade(request);
    throughPino.upgrade(request);
    const [direct, viaPino, directUpgrade, upgradeViaPino] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const [ours, theirs] of [
      [direct, viaPino],
      [directUpgrade, upgradeViaPino],
    ]) {
      expect(Math.abs(Number(ours.time) - Number(theirs.time))).toBeLessThan(60_000);
      expect({ ...ours, time: 0 }).toEqual({ ...theirs, time: 0 });
      expect(Object.keys(ours)).toEqual(Object.keys(theirs));
    }
    expect(direct).toMatchObject({ level: 30, pid: process.pid, trackingId: request.id, res: { statusCode: 202 }, responseTime: 1.25, msg: 'request completed' });
    expect(lines.join('')).not.toContain(HASH);
    expect(lines.every((l) => l.endsWith('\n'))).toBe(true);
  });

  it('write nothing above info', () => {
    const lines: string[] = [];
    const { requestLines } = createLogging({ logLevel: 'warn' }, { write: (line: string) => void lines.push(line) });
    expect(requestLines.enabled()).toBe(false);
  });
});

describe('redactUrl', () => {
  it.each([
    ['/users/u-1', '/users/u-1'],
    ['/logs?limit=5&cursor=abc', '/logs?limit=5&cursor=abc'],
    ['/x?key=k&secret=s&signature=g&access_token=t&code=c&apiKey=a', '/x?key=[REDACTED]&secret=[REDACTED]&signature=[REDACTED]&access_token=[REDACTED]&code=[REDACTED]&apiKey=[REDACTED]'],
    ['/x?userIdHash', '/x?userIdHash'],
    ['/x?%E0%A4%A=1&token=2', '/x?%E0%A4%A=1&token=[REDACTED]'],
    // Capabilities in the path (engagement tokens) and Slack's OAuth state.
    ['/unsubscribe/WyJ1IiwiZSJd.I41Cn5ad-qLHPs_vC9K_uA', '/unsubscribe/[REDACTED]'],
    ['/e/open/T0k3n', '/e/open/[REDACTED]'],
    ['/e/click/T0k3n?token=t', '/e/click/[REDACTED]?token=[REDACTED]'],
    ['/slack/oauth/callback?code=c&state=eyJ4In0', '/slack/oauth/callback?code=[REDACTED]&state=[REDACTED]'],
    ['/e/other/x', '/e/other/x'],
    ['/unsubscribe/', '/unsubscribe/'],
  ])('%s -> %s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});
