// Webhooks: signed deliveries per second from the ledger's events into a local receiver (its own
// process), against a raw undici client posting the same signed bodies to the same receiver,
// alternating rounds in the same run. Clarion's side is the whole pipeline in this process:
// dispatch of delivery_events into webhook events and deliveries, claims, signing, the
// SSRF-guarded POST, and the recording of every attempt (SQLite, WAL).
// Alone: npx tsx bench/webhooks.ts [events] [rounds]
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pino from 'pino';
import { Agent, type Dispatcher } from 'undici';
import { loadConfig } from '../src/config.js';
import { buildDeps } from '../src/deps.js';
import { createAccountWithEnvironment } from '../src/modules/accounts/bootstrap.js';
import type { DeliveryRow, MessageRow, SendingTables } from '../src/modules/sending/sending.tables.js';
import { signatureHeaders, signingKey } from '../src/modules/webhooks/signing.js';
import { WebhooksService } from '../src/modules/webhooks/webhooks.service.js';
import { Secrets } from '../src/secrets.js';
import { openStorage } from '../src/storage/db.js';
import { CLARION_LOG_LEVEL, median, percents } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), '..');

export interface WebhookBenchResult {
  events: number;
  endpoints: number;
  perEndpoint: number;
  rawPerSecond: number;
  clarionPerSecond: number;
  rawCpuUs: number;
  clarionCpuUs: number;
  /** Median over rounds of Clarion's rate divided by the raw client's in the same round. */
  ratio: number;
  /** Each round's ratio. */
  ratios: number[];
}

/** The receiver: answers 200 to every POST on any of its ports; prints DONE when told how many to expect. */
async function receiverMode(ports: number): Promise<void> {
  let count = 0;
  let target = Number.POSITIVE_INFINITY;
  const servers = await Promise.all(
    Array.from({ length: ports }, async () => {
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('ok');
          if (++count === target) process.stdout.write('DONE\n');
        });
      });
      server.keepAliveTimeout = 60_000;
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return (server.address() as { port: number }).port;
    }),
  );
  process.stdout.write(`READY ${JSON.stringify(servers)}\n`);
  process.stdin.on('data', (d) => {
    const n = Number(String(d).trim());
    count = 0;
    target = n;
    process.stdout.write('ARMED\n');
  });
  process.stdin.on('end', () => process.exit(0));
}

function startReceiver(ports: number): Promise<{ child: ChildProcess; ports: number[]; expect: (n: number) => Promise<() => Promise<void>> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SELF, '--receiver', String(ports)], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const waiters: ((line: string) => void)[] = [];
  child.stdout.on('data', (d) => {
    out += d;
    let nl;
    while ((nl = out.indexOf('\n')) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      waiters.shift()?.(line);
    }
  });
  const nextLine = () => new Promise<string>((resolve) => waiters.push(resolve));
  return new Promise((resolve) => {
    void nextLine().then((line) =>
      resolve({
        child,
        ports: JSON.parse(line.slice(6)) as number[],
        // Arms the receiver for n requests; the returned function resolves when they all arrived.
        async expect(n: number) {
          const armed = nextLine();
          child.stdin.write(`${n}\n`);
          await armed;
          const done = nextLine();
          return () => done.then(() => undefined);
        },
      }),
    );
  });
}

export async function runWebhookBench(options: { events?: number; rounds?: number } = {}): Promise<WebhookBenchResult> {
  const events = options.events ?? Number(process.env.BENCH_WEBHOOK_EVENTS ?? 3000);
  const rounds = options.rounds ?? Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 8);
  const endpoints = Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 4);
  const perEndpoint = Number(process.env.BENCH_WEBHOOK_ENDPOINT_CONCURRENCY ?? 16);
  const receiver = await startReceiver(endpoints);
  const urls = receiver.ports.map((p) => `http://127.0.0.1:${p}/hook`);

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-wh-'));
  const config = {
    ...loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: CLARION_LOG_LEVEL }),
    allowPrivateNetworks: true,
    webhookConcurrency: endpoints * perEndpoint,
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

  // Seeds `n` failed email deliveries through the ledger: one delivery_events row each, spread over the endpoints by subscription (all subscribe).
  let seq = 0;
  async function seedEvents(n: number): Promise<void> {
    const at = new Date().toISOString();
    const messages: MessageRow[] = [];
    const deliveries: DeliveryRow[] = [];
    for (let i = 0; i < n; i++) {
      const id = `b${++seq}`;
      messages.push({ tracking_id: id, account_id: scope.accountId, env_id: scope.envId, notification_id: 'order_shipped', user_id: `user-${seq}`, user_email: null, user_number: null, template_id: null, sub_notification_id: null, request: '{}', state: 'processed', job_id: null, ip: null, agent: null, received_at: at, processed_at: at, scheduled_for: null, schedule_updated_at: null, schedule_updated_to: null, schedule_deleted_at: null, failed_at: null, failed_code: null, failed_internal: null, skipped: null });
      deliveries.push({ id: `${id}-email`, tracking_id: id, account_id: scope.accountId, env_id: scope.envId, channel: 'email', routing: 'SEND', routing_reason: null, status: 'pending', content: null, preview: null, attempts: 0, sent_at: null, delivered_at: null, failed_at: null, failed_code: null, failed_internal: null, provider_message_id: null, extra: null, created_at: at, updated_at: at });
    }
    for (let i = 0; i < n; i += 400) {
      await db.insertInto('messages').values(messages.slice(i, i + 400)).execute();
      await db.insertInto('deliveries').values(deliveries.slice(i, i + 400)).execute();
    }
    await deps.ledger.transaction(async (tx) => {
      for (const d of deliveries) await tx.deliveryFailed(d.id, null, { at, code: 'RECIPIENT_REFUSED', reason: '550 5.1.1 user unknown' });
    });
  }

  // One endpoint receives n/endpoints events, each delivered to every endpoint: deliveries = events x endpoints.
  const perRound = Math.max(1, Math.floor(events / endpoints));
  const deliveriesPerRound = perRound * endpoints;

  async function clarionRound(): Promise<{ perSecond: number; cpuUs: number }> {
    await seedEvents(perRound);
    const done = await receiver.expect(deliveriesPerRound);
    const cpu = process.cpuUsage();
    const started = process.hrtime.bigint();
    service.worker.start();
    await done();
    // ...and every attempt recorded.
    await service.worker.stop();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const used = process.cpuUsage(cpu);
    return { perSecond: deliveriesPerRound / seconds, cpuUs: (used.user + used.system) / deliveriesPerRound };
  }

  // The same bodies, signed the same way, posted at the same concurrency per endpoint with the
  // fastest current way to do it: undici's current major (7; 8 needs Node >= 22.19, and this
  // runtime is Node 20) through its dispatch API with a handler of the current (documented)
  // form reading status, headers and body, on a keep-alive Agent of perEndpoint connections per
  // endpoint. Measured on this host, µs CPU per request: request(url) 46-49, agent.request({origin,
  // path}) 33, dispatch 29.5 (the legacy onHeaders/onData handler form, undocumented since 7,
  // 27.7). Pipelining is left off, as undici's docs advise unless the workload suits it: the
  // POSTs are not idempotent (RFC 9112 9.3.2), and with requests in flight equal to connections
  // it only adds head-of-line waits (measured: 4 connections x pipelining 4 with blocking: false
  // cost ~25% more CPU per request and ~20% less rate than 16 x 1).
  const bodies = Array.from({ length: 200 }, (_, i) =>
    JSON.stringify({ id: `evt_${i}`, eventType: 'EMAIL_FAILED', channel: 'EMAIL', userId: `user-${i}`, notificationId: 'order_shipped', trackingId: `b${i}`, failureCode: 'RECIPIENT_REFUSED', occurredAt: new Date().toISOString(), details: { email_failed_at: new Date().toISOString(), reason: '550 5.1.1 user unknown' } }),
  );
  const keys = secrets.map((s) => [signingKey(s)]);
  const agents = urls.map(() => new Agent({ connections: perEndpoint }));
  const origins = urls.map((u) => new URL(u).origin);
  /** One POST: resolves with the status once the whole answer (headers and body) is read. */
  const post = (agent: Agent, options: Dispatcher.DispatchOptions) =>
    new Promise<number>((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      agent.dispatch(options, {
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
  async function rawRound(): Promise<{ perSecond: number; cpuUs: number }> {
    const done = await receiver.expect(deliveriesPerRound);
    const cpu = process.cpuUsage();
    const started = process.hrtime.bigint();
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
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const used = process.cpuUsage(cpu);
    if (failures) throw new Error(`raw baseline: ${failures} failures`);
    return { perSecond: deliveriesPerRound / seconds, cpuUs: (used.user + used.system) / deliveriesPerRound };
  }

  try {
    // Warm-up of both.
    await rawRound();
    await clarionRound();
    const raw: { perSecond: number; cpuUs: number }[] = [];
    const clarion: { perSecond: number; cpuUs: number }[] = [];
    for (let round = 0; round < rounds; round++) {
      raw.push(await rawRound());
      clarion.push(await clarionRound());
    }
    const ratios = clarion.map((c, i) => c.perSecond / raw[i].perSecond);
    return {
      events: deliveriesPerRound,
      endpoints,
      perEndpoint,
      rawPerSecond: median(raw.map((r) => r.perSecond)),
      clarionPerSecond: median(clarion.map((r) => r.perSecond)),
      rawCpuUs: median(raw.map((r) => r.cpuUs)),
      clarionCpuUs: median(clarion.map((r) => r.cpuUs)),
      ratio: median(ratios),
      ratios,
    };
  } finally {
    await service.worker.stop();
    await service.sender.close();
    await Promise.all(agents.map((a) => a.close()));
    receiver.child.stdin!.end();
    await storage.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export function printWebhookBench(r: WebhookBenchResult): void {
  const f = (n: number) => n.toFixed(0);
  console.log(`\nWebhooks into a local receiver (own process), ${r.events} signed deliveries per round, ${r.endpoints} endpoints x ${r.perEndpoint} in flight, Clarion at LOG_LEVEL=${CLARION_LOG_LEVEL}:`);
  console.log(`  raw undici 7 dispatch, same signed bodies: ${f(r.rawPerSecond)} deliveries/s, ${f(r.rawCpuUs)} µs CPU/delivery (medians of ${r.ratios.length} rounds)`);
  console.log(`  Clarion (ledger events -> dispatch -> signed POST -> attempt recorded): ${f(r.clarionPerSecond)} deliveries/s, ${f(r.clarionCpuUs)} µs CPU/delivery`);
  console.log(`  ratio ${(r.ratio * 100).toFixed(1)}% of raw undici, median of rounds alternating the two (each: ${percents(r.ratios)}) (target >= 80%)`);
}

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  if (process.argv.includes('--receiver')) await receiverMode(Number(process.argv[process.argv.indexOf('--receiver') + 1]));
  else {
    const [events, rounds] = process.argv.slice(2).map(Number);
    printWebhookBench(await runWebhookBench({ ...(events ? { events } : {}), ...(rounds ? { rounds } : {}) }));
    process.exit(0);
  }
}
