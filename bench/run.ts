// npm run bench: Clarion against a raw baseline measured in the same run on the same machine.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { clarionDelivery, rawNodemailer } from './email-delivery.js';
import { spawn } from 'node:child_process';
import Database from 'better-sqlite3';
import { ROOT, freePort, load, start, stop, waitForStatus } from './lib.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const EMAILS = Number(process.env.BENCH_EMAILS ?? 2000);

const SEND_BODY = {
  type: 'bench_welcome',
  to: { id: 'bench-user', email: 'bench@example.com' },
  parameters: { name: 'Ada' },
  inapp: { title: 'Welcome {{ name }}', url: 'https://example.com/welcome' },
};

const fmt = (n: number, digits = 1) => n.toFixed(digits);

/**
 * Reads the server's SQLite file (WAL allows a reader beside the writer) until all `total`
 * accepted sends are processed. Sends still in the intake journal have no message row yet, so
 * the total comes from the load generator's 2xx count.
 */
async function drainBacklog(file: string, total: number) {
  const db = new Database(file, { readonly: true });
  const processed = () => (db.prepare(`select count(*) as done from messages where state = 'processed'`).get() as { done: number }).done;
  const doneAtEnd = processed();
  const started = performance.now();
  let done = doneAtEnd;
  while (done < total && performance.now() - started < 300_000) {
    await new Promise((r) => setTimeout(r, 100));
    done = processed();
  }
  db.close();
  const seconds = (performance.now() - started) / 1000;
  return { total, doneAtEnd, drainSeconds: seconds, drainRate: (done - doneAtEnd) / Math.max(seconds, 0.001) };
}

async function acceptance() {
  const basePort = await freePort();
  const baseline = await start('bench/baseline-server.ts', [], { PORT: String(basePort) }, /listening/);
  await load(`http://127.0.0.1:${basePort}/send`, SEND_BODY, {}, CONNECTIONS, 2); // warm-up
  const bare = await load(`http://127.0.0.1:${basePort}/send`, SEND_BODY, {}, CONNECTIONS, SECONDS);
  await stop(baseline.child);

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-'));
  try {
    const port = await freePort();
    // The embedded default: one process, API and workers, SQLite file. In-app deliveries run while it accepts.
    const server = await start('src/main.ts', ['serve'], { CLARION_DATA_DIR: dataDir, PORT: String(port), DATABASE_URL: '' }, /API key\s+clarion_sk_\S+/);
    const key = /API key\s+(clarion_sk_\S+)/.exec(server.out)![1];
    const headers = { authorization: `Bearer ${key}` };
    const warmUp = await load(`http://127.0.0.1:${port}/send`, SEND_BODY, headers, CONNECTIONS, 2);
    const clarion = await load(`http://127.0.0.1:${port}/send`, SEND_BODY, headers, CONNECTIONS, SECONDS);
    // While the API is busy its workers run one job at a time (src/load.ts): report how much was
    // delivered during the load and how long the rest took once it stopped.
    const backlog = await drainBacklog(path.join(dataDir, 'clarion.sqlite'), warmUp.accepted + clarion.accepted);
    await stop(server.child);
    // For comparison: the API process alone (CLARION_ROLE=api; workers would run elsewhere).
    const apiPort = await freePort();
    const api = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'serve'], {
      cwd: ROOT,
      env: { ...process.env, CLARION_DATA_DIR: dataDir, PORT: String(apiPort), DATABASE_URL: '', CLARION_ROLE: 'api', LOG_LEVEL: 'warn' },
      stdio: 'ignore',
    });
    await waitForStatus(`http://127.0.0.1:${apiPort}`);
    await load(`http://127.0.0.1:${apiPort}/send`, SEND_BODY, headers, CONNECTIONS, 2);
    const apiOnly = await load(`http://127.0.0.1:${apiPort}/send`, SEND_BODY, headers, CONNECTIONS, SECONDS);
    await stop(api);
    return { bare, clarion, apiOnly, backlog };
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  console.log(`Clarion benchmarks on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}`);

  const { bare, clarion, apiOnly, backlog } = await acceptance();
  if (clarion.non2xx || clarion.errors) console.log(`  note: Clarion answered ${clarion.non2xx} non-2xx and ${clarion.errors} errors`);
  console.log(`\nSend acceptance, ${CONNECTIONS} connections, ${SECONDS} s (POST /send, in-app content, embedded SQLite):`);
  console.log(`  bare Fastify route, same validation : ${fmt(bare.requestsPerSecond, 0)} req/s  p50 ${bare.p50Ms} ms  p99 ${bare.p99Ms} ms`);
  console.log(`  Clarion                             : ${fmt(clarion.requestsPerSecond, 0)} req/s  p50 ${clarion.p50Ms} ms  p99 ${clarion.p99Ms} ms`);
  console.log(`  ratio ${fmt((clarion.requestsPerSecond / bare.requestsPerSecond) * 100)}% of the bare route (target >= 50%), p99 ${clarion.p99Ms} ms (target < 50 ms)`);
  console.log(
    `  in-app delivered by the same process: ${backlog.doneAtEnd} of ${backlog.total} accepted sends (warm-up included) by the end of the load (workers give way to a busy API), the rest in ${fmt(backlog.drainSeconds)} s after (${fmt(backlog.drainRate, 0)} msg/s)`,
  );
  console.log(`  API process alone (CLARION_ROLE=api): ${fmt(apiOnly.requestsPerSecond, 0)} req/s  p50 ${apiOnly.p50Ms} ms  p99 ${apiOnly.p99Ms} ms (${fmt((apiOnly.requestsPerSecond / bare.requestsPerSecond) * 100)}%)`);

  const raw = await rawNodemailer(EMAILS);
  const ours = await clarionDelivery(EMAILS);
  console.log(`\nEmail delivery into a local SMTP sink, ${EMAILS} messages, pool of 5 connections:`);
  console.log(`  raw nodemailer : ${fmt(raw, 0)} msg/s`);
  console.log(`  Clarion worker : ${fmt(ours, 0)} msg/s`);
  console.log(`  ratio ${fmt((ours / raw) * 100)}% of raw nodemailer (target >= 80%)`);

  const { runWebPushBench, printWebPushBench } = await import('./web-push.js');
  printWebPushBench(await runWebPushBench());
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
