// The two sides of the webhooks bench (bench/webhooks.ts): Clarion's pipeline and the raw undici
// client, each a set of rounds into the same receiver. Clarion's side loads the code of a given
// checkout (this one, or a worktree of an older commit for before/after instruction counts:
// bench/webhook-instructions.ts), through the few entry points every version since 0070 has.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { Agent, type Dispatcher } from 'undici';
import type { loadConfig as LoadConfig } from '../src/config.js';
import type { buildDeps as BuildDeps } from '../src/deps.js';
import type { createAccountWithEnvironment as CreateAccount } from '../src/modules/accounts/bootstrap.js';
import type { DeliveryRow, MessageRow, SendingTables } from '../src/modules/sending/sending.tables.js';
import { signatureHeaders, signingKey } from '../src/modules/webhooks/signing.js';
import type { WebhooksService as Service } from '../src/modules/webhooks/webhooks.service.js';
import type { Secrets as SecretsClass } from '../src/secrets.js';
import type { openStorage as OpenStorage } from '../src/storage/db.js';
import { CLARION_LOG_LEVEL, ROOT } from './lib.js';

export interface RoundResult {
  perSecond: number;
  cpuUs: number;
}

export interface Side {
  /** One round: `deliveries` signed POSTs, `done` resolving once the receiver has them all. */
  round(done: () => Promise<void>): Promise<RoundResult>;
  /** Prepares a round's work outside its measure (Clarion: the ledger events it delivers). */
  prepare(): Promise<void>;
  close(): Promise<void>;
}

export interface SideOptions {
  urls: string[];
  /** Events per endpoint per round; every endpoint receives each (deliveries = perRound x endpoints). */
  perRound: number;
  perEndpoint: number;
}

const measure = async (deliveries: number, work: () => Promise<void>): Promise<RoundResult> => {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  await work();
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const used = process.cpuUsage(cpu);
  return { perSecond: deliveries / seconds, cpuUs: (used.user + used.system) / deliveries };
};

/**
 * Clarion's side: endpoints on the receiver's URLs, and per round `perRound` failed email
 * deliveries committed through the ledger (outside the measure); the round runs the webhook
 * worker from those ledger events to every attempt recorded (dispatch, claims, signing, the
 * SSRF-guarded POST, the attempt rows; SQLite, WAL).
 */
export async function clarionSide(options: SideOptions & { root?: string }): Promise<Side & { secrets: string[] }> {
  const root = options.root ?? ROOT;
  const load = <T>(file: string) => import(pathToFileURL(path.join(root, file)).href) as Promise<T>;
  const { loadConfig } = await load<{ loadConfig: typeof LoadConfig }>('src/config.ts');
  const { buildDeps } = await load<{ buildDeps: typeof BuildDeps }>('src/deps.ts');
  const { createAccountWithEnvironment } = await load<{ createAccountWithEnvironment: typeof CreateAccount }>('src/modules/accounts/bootstrap.ts');
  const { WebhooksService } = await load<{ WebhooksService: typeof Service }>('src/modules/webhooks/webhooks.service.ts');
  const { Secrets } = await load<{ Secrets: typeof SecretsClass }>('src/secrets.ts');
  const { openStorage } = await load<{ openStorage: typeof OpenStorage }>('src/storage/db.ts');

  const { urls, perRound, perEndpoint } = options;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-wh-'));
  const config = {
    ...loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: CLARION_LOG_LEVEL }),
    allowPrivateNetworks: true,
    webhookConcurrency: urls.length * perEndpoint,
    webhookEndpointConcurrency: perEndpoint,
    webhookPollMs: 50,
  };
  const storage = openStorage({ sqliteFile: path.join(dataDir, 'clarion.sqlite') });
  await storage.migrate();
  // The process's logger as the server builds it (stdout), at the bench's level; nothing is logged per delivery.
  const logger = pino({ level: CLARION_LOG_LEVEL }, pino.destination({ dest: '/dev/null', sync: false }));
  const deps = buildDeps(config, { storage, logger, secrets: new Secrets(randomBytes(32)) });
  const account = await createAccountWithEnvironment(deps, { name: 'bench' });
  const scope = { accountId: account.accountId, envId: account.clientId };
  const service = new WebhooksService(deps);
  const secrets: string[] = [];
  for (const url of urls) secrets.push((await service.create(scope, { webhook: url, events: ['EMAIL_FAILED'] })).secret);
  const db = deps.db.withTables<SendingTables>();

  let seq = 0;
  return {
    secrets,
    // Failed email deliveries through the ledger: one delivery_events row each; every endpoint subscribes.
    async prepare() {
      const at = new Date().toISOString();
      const messages: MessageRow[] = [];
      const deliveries: DeliveryRow[] = [];
      for (let i = 0; i < perRound; i++) {
        const id = `b${++seq}`;
        messages.push({ tracking_id: id, account_id: scope.accountId, env_id: scope.envId, notification_id: 'order_shipped', user_id: `user-${seq}`, user_email: null, user_number: null, template_id: null, sub_notification_id: null, request: '{}', state: 'processed', job_id: null, ip: null, agent: null, received_at: at, processed_at: at, scheduled_for: null, schedule_updated_at: null, schedule_updated_to: null, schedule_deleted_at: null, failed_at: null, failed_code: null, failed_internal: null, skipped: null });
        deliveries.push({ id: `${id}-email`, tracking_id: id, account_id: scope.accountId, env_id: scope.envId, channel: 'email', routing: 'SEND', routing_reason: null, status: 'pending', content: null, preview: null, attempts: 0, sent_at: null, delivered_at: null, failed_at: null, failed_code: null, failed_internal: null, provider_message_id: null, extra: null, created_at: at, updated_at: at });
      }
      for (let i = 0; i < perRound; i += 400) {
        await db.insertInto('messages').values(messages.slice(i, i + 400)).execute();
        await db.insertInto('deliveries').values(deliveries.slice(i, i + 400)).execute();
      }
      await deps.ledger.transaction(async (tx) => {
        for (const d of deliveries) await tx.deliveryFailed(d.id, null, { at, code: 'RECIPIENT_REFUSED', reason: '550 5.1.1 user unknown' });
      });
    },
    round: (done) =>
      measure(perRound * urls.length, async () => {
        service.worker.start();
        await done();
        // ...and every attempt recorded.
        await service.worker.stop();
      }),
    async close() {
      await service.worker.stop();
      await service.sender.close();
      await storage.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The raw side: the same bodies, signed the same way, posted at the same concurrency per
 * endpoint with the fastest current way to do it: undici's current major (7; 8 needs Node >=
 * 22.19, and this runtime is Node 20) through its dispatch API with a handler of the current
 * (documented) form reading status, headers and body, on a keep-alive Agent of perEndpoint
 * connections per endpoint. Measured on this host, µs CPU per request: request(url) 46-49,
 * agent.request({origin, path}) 33, dispatch 29.5 (the legacy onHeaders/onData handler form,
 * undocumented since 7, 27.7). Pipelining is left off, as undici's docs advise unless the
 * workload suits it: the POSTs are not idempotent (RFC 9112 9.3.2), and with requests in flight
 * equal to connections it only adds head-of-line waits (measured: 4 connections x pipelining 4
 * with blocking: false cost ~25% more CPU per request and ~20% less rate than 16 x 1).
 */
export function rawSide(options: SideOptions & { secrets: string[] }): Side {
  const { urls, perRound, perEndpoint } = options;
  const bodies = Array.from({ length: 200 }, (_, i) =>
    JSON.stringify({ id: `evt_${i}`, eventType: 'EMAIL_FAILED', channel: 'EMAIL', userId: `user-${i}`, notificationId: 'order_shipped', trackingId: `b${i}`, failureCode: 'RECIPIENT_REFUSED', occurredAt: new Date().toISOString(), details: { email_failed_at: new Date().toISOString(), reason: '550 5.1.1 user unknown' } }),
  );
  const keys = options.secrets.map((s) => [signingKey(s)]);
  const agents = urls.map(() => new Agent({ connections: perEndpoint }));
  const origins = urls.map((u) => new URL(u).origin);
  /** One POST: resolves with the status once the whole answer (headers and body) is read. */
  const post = (agent: Agent, dispatch: Dispatcher.DispatchOptions) =>
    new Promise<number>((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      agent.dispatch(dispatch, {
        onRequestStart() {},
        onResponseStart(_controller, statusCode) {
          status = statusCode;
        },
        onResponseData(_controller, chunk) {
          chunks.push(chunk);
        },
        onResponseEnd() {
          Buffer.concat(chunks).toString('utf8');
          resolve(status);
        },
        onResponseError(_controller, err) {
          reject(err);
        },
      });
    });
  return {
    async prepare() {},
    round: (done) =>
      measure(perRound * urls.length, async () => {
        let failures = 0;
        await Promise.all(
          urls.flatMap((_url, e) =>
            Array.from({ length: perEndpoint }, async (_, lane) => {
              for (let i = lane; i < perRound; i += perEndpoint) {
                const body = bodies[i % bodies.length];
                const headers = signatureHeaders(keys[e], `evt_${i}`, Date.now(), body);
                const status = await post(agents[e], { origin: origins[e], path: '/hook', method: 'POST', headers: { 'content-type': 'application/json', 'user-agent': 'raw', ...headers }, body });
                if (status !== 200) failures++;
              }
            }),
          ),
        );
        await done();
        if (failures) throw new Error(`raw baseline: ${failures} failures`);
      }),
    async close() {
      await Promise.all(agents.map((a) => a.close()));
    },
  };
}
