// The process the gates benchmark (bench/send-gates.ts) measures: Clarion's services over an
// embedded SQLite file, in one process, with no queue polling or timers of its own. For each
// command `round <variant> <n>` on stdin it accepts n sends through the HTTP routes (app.inject,
// 50 in flight, group commits as in production), then routes and delivers them (in-app) through
// the delivery worker's ingestion path, and answers `done <variant> <cpu µs> <wall ms>`; `gc`
// collects garbage (with --expose-gc) and answers `collected`. Its
// parent runs the variants in alternating rounds, and under callgrind counts each round's
// instructions (callgrind_control between `ready`/`done` lines).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { buildDeps } from '../src/deps.js';
import { createAccountWithEnvironment } from '../src/modules/accounts/bootstrap.js';
import { DeliveryWorker } from '../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../src/modules/sending/executors/index.js';
import { INGEST_SENDS_JOB } from '../src/modules/sending/messages.journal.js';
import { Secrets } from '../src/secrets.js';
import { buildServices } from '../src/services.js';
import { BENCH_RATE_LIMITS } from './lib.js';

/** The variants: a type and user without preferences or gates, and with them. */
export const GATE_VARIANTS = {
  plain: { type: 'bench_plain', user: 'plain-user' },
  throttled: { type: 'bench_throttled', user: 'prefs-user' },
  deduplicated: { type: 'bench_deduplicated', user: 'prefs-user' },
} as const;
export type GateVariant = keyof typeof GATE_VARIANTS;

const IN_FLIGHT = 50;
// Never reached: every send is delivered, so both variants do the same delivery work.
const THROTTLING = { max: 1_000_000_000, period: 1, unit: 'hours', forever: false, scope: ['userId', 'notificationId'] };

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-gates-'));
  const config = loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: 'warn', CLARION_INBOUND_SMTP_PORT: 'off', ...BENCH_RATE_LIMITS });
  const deps = buildDeps(config, { logger: pino({ level: 'warn' }), secrets: new Secrets(randomBytes(32)) });
  await deps.storage.migrate();
  const services = buildServices(deps);
  const app = await buildApp(deps, services);
  await app.ready();
  const { executors, close } = buildExecutors(deps, services);
  const worker = new DeliveryWorker(deps, deps.queue, executors, services);
  const account = await createAccountWithEnvironment(deps, { name: 'bench' });
  const auth = { authorization: `Bearer ${account.apiKey}` };
  const post = async (url: string, payload: unknown) => {
    const res = await app.inject({ method: 'POST', url, headers: auth, payload: payload as object });
    if (res.statusCode >= 300) throw new Error(`${url} answered ${res.statusCode}: ${res.body}`);
  };
  await post('/types', { notificationId: GATE_VARIANTS.plain.type, title: 'plain', channels: ['INAPP_WEB', 'EMAIL'] });
  await post('/types', { notificationId: GATE_VARIANTS.throttled.type, title: 'throttled', channels: ['INAPP_WEB', 'EMAIL'], throttling: THROTTLING });
  await post('/types', { notificationId: GATE_VARIANTS.deduplicated.type, title: 'deduplicated', channels: ['INAPP_WEB', 'EMAIL'], throttling: THROTTLING, deduplication: { duration: 3600 } });
  // The user of the gated variants has preferences for both types (email off, in-app instant); the plain one has none.
  for (const type of [GATE_VARIANTS.throttled.type, GATE_VARIANTS.deduplicated.type]) {
    await post(`/user_preferences/${GATE_VARIANTS.throttled.user}`, [
      { notificationId: type, channel: 'EMAIL', delivery: 'off' },
      { notificationId: type, channel: 'INAPP_WEB', delivery: 'instant' },
    ]);
  }

  let sequence = 0;
  const round = async (variant: GateVariant, n: number) => {
    const { type, user } = GATE_VARIANTS[variant];
    let next = 0;
    const sender = async () => {
      while (next < n) {
        next++;
        // Each send its own content: deduplication lets every one through, as throttling does.
        await post('/send', { type, to: { id: user, email: `${user}@example.com` }, parameters: { name: 'Ada', n: ++sequence }, inapp: { title: 'Welcome {{ name }} #{{ n }}' } });
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, sender));
    // What the ingestion jobs do (4 journal chunks a batch), without the queue's polling.
    for (;;) {
      const chunks = (await deps.db.selectFrom('send_intake' as never).select('seq' as never).orderBy('seq' as never).limit(4).execute()) as { seq: number }[];
      if (chunks.length === 0) break;
      const failures = await worker.ingestChunks(chunks.map(({ seq }) => ({ data: { seq }, job: { id: '', name: INGEST_SENDS_JOB, attempt: 1, maxAttempts: Number.POSITIVE_INFINITY } })));
      const failed = failures.find((f) => f !== undefined);
      if (failed !== undefined) throw failed instanceof Error ? failed : new Error(JSON.stringify(failed));
    }
  };

  const out = (line: string) => process.stdout.write(`${line}\n`);
  out('ready');
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [command, variant, count] = line.trim().split(/\s+/);
    if (command === 'quit') {
      // What was delivered per variant: every send, or the comparison is not of the same work.
      for (const [name, { type }] of Object.entries(GATE_VARIANTS)) {
        const { rows } = await sql<{ n: number | string }>`select count(*) as n from deliveries d join messages m on m.tracking_id = d.tracking_id
          where m.notification_id = ${type} and d.status = 'delivered'`.execute(deps.db);
        const n = rows[0].n;
        out(`delivered ${name} ${Number(n)}`);
      }
      break;
    }
    if (command === 'gc') {
      // A full collection between rounds (node --expose-gc), so that no counted round pays for the garbage of others.
      (globalThis as { gc?: () => void }).gc?.();
      out('collected');
      continue;
    }
    if (command !== 'round' || !(variant in GATE_VARIANTS)) throw new Error(`unknown command: ${line}`);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await round(variant as GateVariant, Number(count));
    const cpu = process.cpuUsage(cpu0);
    out(`done ${variant} ${cpu.user + cpu.system} ${(performance.now() - t0).toFixed(1)}`);
  }
  await worker.close();
  await close();
  await app.close();
  await deps.storage.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
