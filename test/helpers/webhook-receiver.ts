import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { verify as pingramVerify } from 'pingram/webhooks';
import { Webhook } from 'standardwebhooks';

/** What the receiver answers to one request. */
export type ReceiverAction =
  | { status: number; headers?: Record<string, string>; body?: string }
  /** Never answers (until the receiver closes). */
  | 'hang';

export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The status answered; null while held (a hang). */
  answered: number | null;
}

/**
 * A webhook endpoint on loopback that answers on a script: each request takes the next action
 * of `script` (the last one repeats), or what `answer` returns. Records every request.
 */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private script: ReceiverAction[] = [{ status: 200, body: 'ok' }];
  private readonly hanging = new Set<http.ServerResponse>();
  private server!: http.Server;
  url = '';
  port = 0;

  /** Listens on `host` (default 127.0.0.1; '::' for both families where the system allows). */
  async start(host = '127.0.0.1'): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const action = this.script.length > 1 ? this.script.shift()! : this.script[0];
        this.requests.push({ path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered: action === 'hang' ? null : action.status });
        if (action === 'hang') {
          this.hanging.add(res);
          return;
        }
        res.writeHead(action.status, action.headers ?? {});
        res.end(action.body ?? '');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, host, resolve));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}/hook`;
    return this;
  }

  /** The answers to the next requests, in order; the last one repeats. */
  answer(...script: ReceiverAction[]): void {
    this.script = script;
  }

  /** Requests carrying this event id (X-Service-Id). */
  of(eventId: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.headers['x-service-id'] === eventId);
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * Verifies a received delivery as its consumers would: with `verify` of pingram/webhooks over
 * the X-Service-* headers and with standardwebhooks over the webhook-* headers. Each throws when
 * the signature does not match `secret` (or is outside the tolerance, in seconds).
 */
export function verifySignatures(req: ReceivedRequest, secret: string, tolerance?: number) {
  const h = req.headers as Record<string, string>;
  const viaPingram = pingramVerify({ payload: req.body, headers: { id: h['x-service-id'], signature: h['x-service-signature'], timestamp: h['x-service-timestamp'] }, secret, ...(tolerance ? { tolerance } : {}) });
  const viaStandard = new Webhook(secret).verify(req.body, { 'webhook-id': h['webhook-id'], 'webhook-timestamp': h['webhook-timestamp'], 'webhook-signature': h['webhook-signature'] });
  return { viaPingram, viaStandard };
}
