import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { MAX_PATH_SEGMENT_LENGTH } from '../../src/http/error-handler.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { eventually } from '../helpers/wait.js';

/** Writes raw bytes to the listening server (app.inject would bypass Node's HTTP parser) and reads the whole answer. */
function rawRequest(port: number, bytes: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const status = Number(statusLine.split(' ')[1]);
      if (!status) reject(new Error(`no answer: ${JSON.stringify(data)}`));
      else resolve({ status, headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(bytes);
  });
}

function expectErrorBody(res: { status: number; body: string }, status: number, code: keyof typeof ERROR_STATUS) {
  expect(res.status).toBe(status);
  const body = JSON.parse(res.body);
  expect(typeof body.trackingId).toBe('string');
  expect(body.error.code).toBe(code);
  expect(ERROR_STATUS[body.error.code as keyof typeof ERROR_STATUS]).toBe(status);
  expect(typeof body.error.message).toBe('string');
}

// Only the HTTP layer is under test here: one engine is enough.
describe('answers written outside the routes carry the Error body', () => {
  let t: TestContext;
  let port: number;
  let key: string;
  const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n${extra}\r\n`;

  beforeAll(async () => {
    t = await createTestContext('sqlite');
    key = t.account.apiKey;
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as net.AddressInfo).port;
  });
  afterAll(() => t.close());

  it('a path segment over the router limit: 414 URI_TOO_LONG', async () => {
    expectErrorBody(await rawRequest(port, get(`/users/${'a'.repeat(MAX_PATH_SEGMENT_LENGTH + 1)}`)), 414, 'URI_TOO_LONG');
  });

  it('an Idempotency-Key sent twice is refused, not joined into one key "a, b"', async () => {
    const body = JSON.stringify({ type: 'twice', to: { id: 'ada' }, inapp: { title: 'x' } });
    const post = (headers: string) =>
      `POST /send HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n${headers}\r\n${body}`;
    const twice = await rawRequest(port, post('Idempotency-Key: a\r\nidempotency-key: b\r\n'));
    expectErrorBody(twice, 400, 'VALIDATION_FAILED');
    expect(JSON.parse(twice.body).error.message).toContain('Idempotency-Key');
    const once = await rawRequest(port, post('Idempotency-Key: a, b\r\n'));
    expect(once.status, once.body).toBe(200);
  });

  it('a doubled slash (a client base URL ending in "/") reaches the route', async () => {
    const res = await rawRequest(port, get('//account'));
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ accountId: t.account.accountId });
  });

  it('a malformed percent-escape: 400 VALIDATION_FAILED', async () => {
    expectErrorBody(await rawRequest(port, get('/users/%E0%A4%A')), 400, 'VALIDATION_FAILED');
  });

  it('headers over the limit: 431 HEADERS_TOO_LARGE, its trackingId in the log', async () => {
    const logged = vi.spyOn(t.app.log, 'info');
    try {
      const res = await rawRequest(port, get('/users', `X-Big: ${'b'.repeat(20_000)}\r\n`));
      expectErrorBody(res, 431, 'HEADERS_TOO_LARGE');
      const { trackingId } = JSON.parse(res.body);
      expect(logged.mock.calls.some(([fields]) => (fields as { trackingId?: string }).trackingId === trackingId)).toBe(true);
    } finally {
      logged.mockRestore();
    }
  });

  it('a bad request line: 400 VALIDATION_FAILED', async () => {
    expectErrorBody(await rawRequest(port, 'NOT A REQUEST\r\n\r\n'), 400, 'VALIDATION_FAILED');
  });

  it('a raw NUL byte in the request line: 400 VALIDATION_FAILED', async () => {
    expectErrorBody(await rawRequest(port, get('/users/a\u0000b')), 400, 'VALIDATION_FAILED');
  });

  it('a bad chunk: 400 VALIDATION_FAILED', async () => {
    const res = await rawRequest(
      port,
      `POST /environments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    );
    expectErrorBody(res, 400, 'VALIDATION_FAILED');
  });

  it('HTTP/1.1 without Host: 400 VALIDATION_FAILED with a body (Node alone answers an empty 400)', async () => {
    const res = await rawRequest(port, `GET /users HTTP/1.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    expectErrorBody(res, 400, 'VALIDATION_FAILED');
    expect(JSON.parse(res.body).error.message).toMatch(/Host/);
    // HTTP/1.0 does not need Host.
    expect((await rawRequest(port, `GET /users HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`)).status).toBe(200);
  });

  it('a known path with another method: 405 METHOD_NOT_ALLOWED with Allow; an unknown path: 404 ROUTE_NOT_FOUND', async () => {
    const res = await rawRequest(port, `PUT /users HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    expectErrorBody(res, 405, 'METHOD_NOT_ALLOWED');
    expect(res.headers.allow).toContain('GET');
    expectErrorBody(await rawRequest(port, get('/no-such-route')), 404, 'ROUTE_NOT_FOUND');
  });
});

describe('a request arriving while the server closes', () => {
  it('answers 503 SERVICE_UNAVAILABLE with the Error body (Fastify alone answers its own body)', async () => {
    const c = await createTestContext('sqlite');
    await c.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (c.app.server.address() as net.AddressInfo).port;
    const accepted: net.Socket[] = [];
    c.app.server.on('connection', (s: net.Socket) => accepted.push(s));
    const socket = net.connect({ host: '127.0.0.1', port });
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('error', () => undefined);
    const done = new Promise((resolve) => socket.on('close', resolve));
    // The request's head is begun before the close, so closing does not reap the connection as
    // idle, and ends once the server has stopped listening.
    const begun = 'GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n';
    socket.write(begun);
    await eventually(() => accepted[0]?.bytesRead === begun.length, 10_000, 'the server to read the begun head');
    const closing = c.app.close();
    await eventually(() => !c.app.server.listening, 10_000, 'the server to stop listening');
    socket.write('Connection: keep-alive\r\n\r\n');
    await done;
    await closing;
    await c.storage.destroy();
    expect(data.startsWith('HTTP/1.1 503')).toBe(true);
    // However the client asked, the connection ends with the answer.
    expect(data.toLowerCase()).toContain('\r\nconnection: close\r\n');
    const parsed = JSON.parse(data.slice(data.indexOf('\r\n\r\n') + 4));
    expect(parsed.error.code).toBe('SERVICE_UNAVAILABLE');
    expect(typeof parsed.trackingId).toBe('string');
  });
});
