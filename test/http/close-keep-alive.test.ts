import http from 'node:http';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildDeps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { Secrets } from '../../src/secrets.js';
import { buildServices } from '../../src/services.js';
import { createAccountWithEnvironment } from '../../src/modules/accounts/bootstrap.js';
import { testConfig } from '../helpers/context.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/** A POST whose body is sent in two parts: the second when the test calls `finish`. */
function postInTwoParts(agent: http.Agent, port: number, path: string, headers: Record<string, string>, body: string) {
  const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } });
  const res = new Promise<http.IncomingMessage & { body: string }>((resolve, reject) => {
    req.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(Object.assign(response, { body: text })));
    });
    req.on('error', reject);
  });
  req.write(body.slice(0, 10));
  return { response: res, finish: () => req.end(body.slice(10)) };
}

describe.each(STORAGE_KINDS)('closing the server with a keep-alive request under way (%s)', (kind) => {
  let app: App;
  let storage: TestStorage;
  let port: number;
  let apiKey: string;
  let received: () => void;
  const requestReceived = new Promise<void>((resolve) => (received = resolve));

  beforeAll(async () => {
    storage = await createTestStorage(kind);
    const deps = buildDeps(testConfig(), { storage, logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)) });
    app = await buildApp(deps, buildServices(deps));
    // Tells the test when the server has the request's head, before its body.
    app.addHook('onRequest', (request, _reply, done) => {
      if (request.url === '/send') received();
      done();
    });
    apiKey = (await createAccountWithEnvironment(deps, { name: 'Closing' })).apiKey;
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as { port: number }).port;
  });
  afterAll(() => storage.destroy());

  it('ends its connection once answered, so the close does not wait out the keep-alive timeout', async () => {
    // The client keeps its connections open for reuse, as SDKs and the carrier's fetch do.
    const agent = new http.Agent({ keepAlive: true });
    const send = { type: 'alert', to: { id: 'closing-user', email: 'user@example.com' }, email: { subject: 'Hi', html: '<p>Hi</p>' } };
    const request = postInTwoParts(agent, port, '/send', { authorization: `Bearer ${apiKey}` }, JSON.stringify(send));
    // The request is under way (its head read, its body not) when the close begins.
    await requestReceived;
    const closed = app.close();
    await eventually(() => !app.server.listening, 5_000, 'the server to stop listening');
    request.finish();

    const res = await request.response;
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.parse(res.body).trackingId).toMatch(/^[0-9a-f-]{36}$/);
    // Without that, the connection would stay open (the agent keeping it free for reuse) and
    // app.close() would wait for it for Fastify's 72 s: past this test's timeout.
    await closed;
    await eventually(() => Object.values(agent.freeSockets).flat().length === 0, 5_000, 'the agent to see its connection closed');
    agent.destroy();
  });
});
