import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What a path answers: a status and body at once; 'hold' keeps each request until release()
 * answers it; 'hang' never answers (until the receiver closes); `{ trickle: status, everyMs }`
 * answers that status at once, then writes a byte every `everyMs` and never ends the body (until
 * the client or the receiver closes the connection).
 */
export type RouteAction = { status: number; body?: string } | 'hold' | 'hang' | { trickle: number; everyMs: number };

export interface RoutedRequest {
  path: string;
  eventId: string;
  body: string;
}

/**
 * A webhook endpoint on one loopback port whose answer depends on the request's path, so that
 * several endpoints of a test share a host (and an origin) yet behave apart. Paths not routed
 * answer 200 `ok`. Records every request as it arrives, held ones included.
 */
export class RoutedReceiver {
  readonly requests: RoutedRequest[] = [];
  /** Trickled answers whose connection the client closed. */
  closedTrickles = 0;
  private readonly routes = new Map<string, RouteAction>();
  private readonly held = new Map<string, http.ServerResponse[]>();
  private readonly open = new Set<http.ServerResponse>();
  private server!: http.Server;
  port = 0;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        this.requests.push({ path, eventId: String(req.headers['x-service-id']), body: Buffer.concat(chunks).toString('utf8') });
        const action = this.routes.get(path) ?? { status: 200, body: 'ok' };
        if (action === 'hang' || action === 'hold') {
          this.open.add(res);
          if (action === 'hold') this.held.set(path, [...(this.held.get(path) ?? []), res]);
          return;
        }
        if ('trickle' in action) {
          this.open.add(res);
          res.writeHead(action.trickle, { 'content-type': 'text/plain' });
          res.write('x');
          const drip = setInterval(() => res.write('x'), action.everyMs);
          res.on('close', () => {
            clearInterval(drip);
            if (this.open.delete(res)) this.closedTrickles++;
          });
          return;
        }
        res.writeHead(action.status).end(action.body ?? '');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  route(path: string, action: RouteAction): void {
    this.routes.set(path, action);
  }

  /** Answers the requests held on `path` with `answer`, and the later ones at once. */
  release(path: string, answer: { status: number; body?: string } = { status: 200, body: 'ok' }): void {
    this.routes.set(path, answer);
    for (const res of this.held.get(path) ?? []) {
      this.open.delete(res);
      res.writeHead(answer.status).end(answer.body ?? '');
    }
    this.held.delete(path);
  }

  to(path: string): RoutedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    for (const res of this.open) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
