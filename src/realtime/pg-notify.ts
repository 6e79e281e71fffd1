import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';

/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. */
export const MAX_NOTIFY_BYTES = 7900;

const CHANNEL_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** NOTIFY through the application's pool (inside a transaction it is sent on commit). */
export async function pgNotify<DB>(db: Kysely<DB>, channel: string, payload: string): Promise<void> {
  await sql`select pg_notify(${channel}, ${payload})`.execute(db);
}

/**
 * NOTIFY of several payloads in one statement, in their order (PostgreSQL delivers a
 * transaction's notifications in the order they were sent, and unnest yields the array's).
 */
export async function pgNotifyMany<DB>(db: Kysely<DB>, channel: string, payloads: string[]): Promise<void> {
  await sql`select pg_notify(${channel}, p) from unnest(${payloads}::text[]) as p`.execute(db);
}

/**
 * LISTEN on one channel over a dedicated connection (a pooled one would lose its LISTEN when
 * returned), reconnecting with backoff when the connection drops.
 */
export class PgListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = 500;

  constructor(
    private readonly connectionString: string,
    private readonly channel: string,
    private readonly onPayload: (payload: string) => void,
    private readonly logger: Logger,
  ) {
    if (!CHANNEL_NAME.test(channel)) throw new Error(`invalid LISTEN channel name "${channel}"`);
  }

  /** Resolves once listening, or once the first attempt failed (it keeps retrying in the background). */
  async start(): Promise<void> {
    await this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.connectionString });
    client.on('notification', (message) => {
      if (message.channel === this.channel && message.payload) this.onPayload(message.payload);
    });
    client.on('error', (err) => {
      this.logger.warn({ err, channel: this.channel }, 'LISTEN connection failed; reconnecting');
      this.reconnect(client);
    });
    client.on('end', () => this.reconnect(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (this.closed) {
        await client.end();
        return;
      }
      this.client = client;
      this.retryMs = 500;
    } catch (err) {
      this.logger.warn({ err, channel: this.channel }, 'could not LISTEN; retrying');
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.closed || this.retryTimer) return;
    if (this.client === client) this.client = undefined;
    client.end().catch(() => undefined);
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, 30_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }
}
