// The whole webhook exchange ends by the timeout: a 2xx whose body never ends is that 2xx at the
// deadline, its connection closed, so the attempt is recorded before the delivery's lease runs
// out and nothing is posted twice; a resolver that does not answer is a timeout too.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookSender } from '../../src/modules/webhooks/webhook-sender.js';
import { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { RoutedReceiver } from './routed-receiver.js';
import { transition } from './webhook-fixtures.js';

/**
 * Short enough for a test, long enough that a loopback answer's status always comes within it.
 * Whichever of the deadline and undici's body idle timer ends a trickled body, the answer is the
 * same (its status), so no assertion below rests on which one fires first.
 */
const TIMEOUT_MS = 1000;
/** A test that would wait on a request that never ends fails fast instead. */
const TEST_TIMEOUT_MS = 10_000;

describe('webhook sender: the whole exchange within the timeout', () => {
  let receiver: RoutedReceiver;
  let sender: WebhookSender;
  beforeAll(async () => {
    receiver = await new RoutedReceiver().start();
    // One connection per endpoint: a request that kept it would leave the next one waiting.
    sender = new WebhookSender({ timeoutMs: TIMEOUT_MS, allowPrivateNetworks: true, connectionsPerEndpoint: 1 });
  });
  afterAll(async () => {
    await sender.close();
    await receiver.close();
  });

  it('answers a 2xx whose body never ends with that 2xx at the deadline, and closes its connection', { timeout: TEST_TIMEOUT_MS }, async () => {
    receiver.route('/trickle', { trickle: 200, everyMs: 50 });
    const result = await sender.post(receiver.url('/trickle'), {}, '{}', 'endpoint-trickle');
    expect(result).toMatchObject({ statusCode: 200, body: expect.stringMatching(/^x{1,4096}$/) });
    expect(result.error).toBeUndefined();
    expect(result.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
    await eventually(() => receiver.closedTrickles === 1, 5_000, 'the trickled connection closed');
    // The endpoint's only connection is free again.
    receiver.route('/trickle', { status: 200, body: 'ok' });
    expect(await sender.post(receiver.url('/trickle'), {}, '{}', 'endpoint-trickle')).toMatchObject({ statusCode: 200, body: 'ok' });
    expect(receiver.to('/trickle')).toHaveLength(2);
  });

  it('answers a status followed by silence with that status; a failing status stays a failure', { timeout: TEST_TIMEOUT_MS }, async () => {
    receiver.route('/silent', { trickle: 202, everyMs: 3_600_000 });
    receiver.route('/failing', { trickle: 503, everyMs: 50 });
    const [silent, failing] = await Promise.all([sender.post(receiver.url('/silent'), {}, '{}', 'endpoint-silent'), sender.post(receiver.url('/failing'), {}, '{}', 'endpoint-failing')]);
    expect(silent).toMatchObject({ statusCode: 202, body: 'x' });
    expect(failing).toMatchObject({ statusCode: 503, body: expect.stringMatching(/^x+$/) });
  });

  it('counts resolving the host in the timeout: no answer from the resolver is a timeout, and a late one posts nothing', { timeout: TEST_TIMEOUT_MS }, async () => {
    let answer: (addresses: { address: string; family: number }[]) => void = () => {};
    const lookups: string[] = [];
    const slowDns = new WebhookSender({
      timeoutMs: TIMEOUT_MS,
      allowPrivateNetworks: true,
      connectionsPerEndpoint: 1,
      lookup: (hostname) => {
        lookups.push(hostname);
        return new Promise((resolve) => (answer = resolve));
      },
    });
    try {
      const url = `http://slow-dns.test:${receiver.port}/late`;
      const result = await slowDns.post(url, {}, '{}');
      expect(result).toMatchObject({ statusCode: null, error: `TIMEOUT: Timed out after ${TIMEOUT_MS} ms` });
      expect(result.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
      // The address comes after the attempt ended: nothing is sent for it. The next attempt
      // finds the address kept and posts once.
      answer([{ address: '127.0.0.1', family: 4 }]);
      // Its check and keeping take a few promise turns, all done before the next macrotask.
      await new Promise((resolve) => setImmediate(resolve));
      expect(await slowDns.post(url, {}, '{}')).toMatchObject({ statusCode: 200, body: 'ok' });
      expect(lookups).toEqual(['slow-dns.test']);
      expect(receiver.to('/late')).toHaveLength(1);
    } finally {
      await slowDns.close();
    }
  });

  it('reads past 1xx informational answers (102, 103) to the final one', { timeout: TEST_TIMEOUT_MS }, async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeProcessing();
        res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        res.writeHead(200).end('done');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      expect(await sender.post(`http://127.0.0.1:${port}/hook`, {}, '{}')).toMatchObject({ statusCode: 200, body: 'done' });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe.each(STORAGE_KINDS)('a webhook endpoint whose 2xx body never ends (%s)', (kind) => {
  const clock = new ManualClock();
  let t: TestContext;
  let receiver: RoutedReceiver;
  let service: WebhooksService;
  beforeAll(async () => {
    t = await createTestContext(kind, { clock, config: { allowPrivateNetworks: true, webhookTimeoutMs: TIMEOUT_MS } });
    receiver = await new RoutedReceiver().start();
    service = new WebhooksService(t.deps, { random: () => 0.5 });
  });
  afterAll(async () => {
    await service.sender.close();
    await receiver.close();
    await t.close();
  });
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });

  it('is one post, recorded as a success with what came of the body, and never posted again', { timeout: TEST_TIMEOUT_MS }, async () => {
    receiver.route('/trickle', { trickle: 200, everyMs: 50 });
    const endpoint = await service.create(scope(), { webhook: receiver.url('/trickle'), events: ['EMAIL_FAILED'] });
    await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    const { attempts } = await service.attempts(scope(), endpoint.id, {});
    expect(attempts).toEqual([expect.objectContaining({ attempt: 1, success: true, statusCode: 200, response: expect.stringMatching(/^x+$/), error: null, nextAttemptAt: null })]);
    expect(attempts[0].durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
    await eventually(() => receiver.closedTrickles === 1, 5_000, 'the trickled connection closed');
    // Past the lease and the whole retry schedule: settled, so nothing is claimed or posted again.
    clock.advance(7 * 24 * 3600_000);
    expect(await service.worker.runOnce()).toBe(0);
    expect(receiver.to('/trickle')).toHaveLength(1);
  });
});
