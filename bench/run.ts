// npm run bench: Clarion against a raw baseline measured in the same run on the same machine.
// Scenarios (BENCH_ONLY=name,name to pick): send (SQLite, plus BENCH_BEFORE_REF), postgres,
// seeded (cost as the work grows), email, broadcast, webpush, webhooks, gates (a send with preferences and
// throttling or deduplication against one without); opt-in only: send-instructions
// (callgrind's instruction counts per accepted send, plus BENCH_BEFORE_REF), gates-instructions
// (the gates scenario in instructions per send), email-instructions (the email scenario's worker
// in instructions per mail, plus BENCH_BEFORE_REF).
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { broadcastBench, printBroadcast } from './broadcast.js';
import { checkoutBefore } from './before.js';
import { type EmailRun, emailRounds } from './email-delivery.js';
import { CLARION_LOG_LEVEL, ROOT, fmt, median, percents, stop } from './lib.js';
import { printSeeded, seededPostgres, seededSqlite } from './seeded.js';
import { type PostgresSendResult, createDatabase, postgresSend, postgresUnreachable } from './send-postgres.js';
import { BENCH, optedIn, wants } from './settings.js';
import { type SqliteSendResult, sqliteSend, startBareRoute } from './send-sqlite.js';

const cpu = (r: { cpuUsPerRequest?: number }) => (r.cpuUsPerRequest === undefined ? '' : `, ${fmt(r.cpuUsPerRequest, 0)} µs CPU/request`);

function printSqliteSend({ embedded, quietIndex, beforeIndex, apiOnly, backlog, before }: SqliteSendResult) {
  const [bare, clarion] = embedded.results.map((r) => r.summary);
  const ratio = embedded.ratio(1, 0);
  if (clarion.non2xx || clarion.errors) console.log(`  note: Clarion answered ${clarion.non2xx} non-2xx and ${clarion.errors} errors`);
  console.log(`\nSend acceptance, ${BENCH.connections} connections, ${BENCH.rounds} alternating rounds of ${BENCH.roundSeconds} s (POST /send, in-app content, embedded SQLite):`);
  console.log(`  bare Fastify route, same validation : ${fmt(bare.requestsPerSecond, 0)} req/s  p50 ${bare.p50Ms} ms  p99 ${bare.p99Ms} ms (median round)${cpu(bare)}`);
  console.log(`  Clarion                             : ${fmt(clarion.requestsPerSecond, 0)} req/s  p50 ${clarion.p50Ms} ms  p99 ${clarion.p99Ms} ms (worst round)${cpu(clarion)}`);
  console.log(`  ratio ${fmt(ratio.median * 100)}% of the bare route, median of the rounds' ratios (target >= 60% at the default level), p99 ${clarion.p99Ms} ms (target < 50 ms)`);
  console.log(`  rounds' ratios (%): ${percents(ratio.each)}`);
  if (quietIndex !== undefined) {
    const quiet = embedded.results[quietIndex].summary;
    const r = embedded.ratio(quietIndex, 0);
    console.log(`  Clarion at LOG_LEVEL=warn, same rounds: ${fmt(quiet.requestsPerSecond, 0)} req/s  p50 ${quiet.p50Ms} ms  p99 ${quiet.p99Ms} ms${cpu(quiet)}, ${fmt(r.median * 100)}% of the bare route (rounds: ${percents(r.each)}); ${CLARION_LOG_LEVEL} vs warn ${fmt(embedded.ratio(1, quietIndex).median * 100)}%`);
  }
  if (before && beforeIndex !== undefined) {
    const old = embedded.results[beforeIndex].summary;
    const vsBefore = embedded.ratio(1, beforeIndex);
    console.log(`  before (${before.ref} = ${before.commit.slice(0, 10)}) : ${fmt(old.requestsPerSecond, 0)} req/s  p50 ${old.p50Ms} ms  p99 ${old.p99Ms} ms${cpu(old)}, ${fmt(embedded.ratio(beforeIndex, 0).median * 100)}% of the bare route`);
    console.log(`  after vs before ${fmt(vsBefore.median * 100)}%, median of the rounds' ratios (target >= 95%); rounds (%): ${percents(vsBefore.each)}`);
  }
  console.log(
    `  in-app delivered by the same process: ${backlog.doneAtEnd} of ${backlog.total} accepted sends (warm-up included) by the end of the load (workers give way to a busy API), then ${fmt(backlog.drainRate, 0)} msg/s once it stopped (all in about ${fmt(backlog.secondsLeft, 0)} s)`,
  );
  const api = apiOnly.results[1].summary;
  const apiRatio = apiOnly.ratio(1, 0);
  console.log(
    `  API process alone (CLARION_ROLE=api): ${fmt(api.requestsPerSecond, 0)} req/s  p50 ${api.p50Ms} ms  p99 ${api.p99Ms} ms${cpu(api)} (${fmt(apiRatio.median * 100)}% of the bare route's ${fmt(apiOnly.results[0].summary.requestsPerSecond, 0)} in its rounds; rounds: ${percents(apiRatio.each)})`,
  );
}

function printPostgresSend({ embedded, apiOnly }: PostgresSendResult) {
  const [raw, one] = embedded.results.map((r) => r.summary);
  const ratio = embedded.ratio(1, 0);
  console.log(`\nSend acceptance on PostgreSQL, ${BENCH.connections} connections, ${BENCH.rounds} alternating rounds of ${BENCH.roundSeconds} s (database made for the run):`);
  console.log(`  raw route, one INSERT per request (pg, pipelined) : ${fmt(raw.requestsPerSecond, 0)} req/s  p50 ${raw.p50Ms} ms  p99 ${raw.p99Ms} ms (median round)${cpu(raw)}`);
  if (one.non2xx || one.errors) console.log(`  note: Clarion answered ${one.non2xx} non-2xx and ${one.errors} errors`);
  console.log(`  Clarion, one process (API + workers)              : ${fmt(one.requestsPerSecond, 0)} req/s  p50 ${one.p50Ms} ms  p99 ${one.p99Ms} ms (worst round)${cpu(one)}`);
  console.log(`  ratio ${fmt(ratio.median * 100)}% of the raw route (target >= 60%, p99 < 150 ms); rounds (%): ${percents(ratio.each)}`);
  const [rawApi, api] = apiOnly.results.map((r) => r.summary);
  const apiRatio = apiOnly.ratio(1, 0);
  if (api.non2xx || api.errors) console.log(`  note: Clarion api answered ${api.non2xx} non-2xx and ${api.errors} errors`);
  console.log(`  Clarion, CLARION_ROLE=api                         : ${fmt(api.requestsPerSecond, 0)} req/s  p50 ${api.p50Ms} ms  p99 ${api.p99Ms} ms${cpu(api)} (raw route ${fmt(rawApi.requestsPerSecond, 0)} in its rounds)`);
  console.log(`  ratio ${fmt(apiRatio.median * 100)}% of the raw route (target >= 100%); rounds (%): ${percents(apiRatio.each)}`);
}

async function main() {
  console.log(`Clarion benchmarks on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, Clarion at LOG_LEVEL=${CLARION_LOG_LEVEL}`);

  // Every scenario runs the built server (dist/), as `npm start` does: built once here.
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });

  if (wants('send')) {
    const bare = await startBareRoute();
    const before = BENCH.beforeRef ? checkoutBefore(BENCH.beforeRef) : undefined;
    try {
      printSqliteSend(await sqliteSend(bare, before));
    } finally {
      before?.remove();
      await stop(bare.child);
    }
  }

  if (optedIn('send-instructions')) {
    const { callgrindMissing, sendInstructions, printSendInstructions } = await import('./send-instructions.js');
    const missing = callgrindMissing();
    if (missing) console.log(`\nInstructions per send: skipped, ${missing}`);
    else {
      const before = BENCH.beforeRef ? checkoutBefore(BENCH.beforeRef) : undefined;
      try {
        printSendInstructions(await sendInstructions(before));
      } finally {
        before?.remove();
      }
    }
  }

  if (wants('gates')) {
    const { gateTiming, printGateRounds } = await import('./send-gates.js');
    printGateRounds(
      `Send with preferences and throttling (deduplication) vs without, accepted, routed and delivered in-app in one process (SQLite), ${BENCH.rounds} alternating rounds, process CPU per send:`,
      (us) => `${fmt(us, 0)} µs`,
      await gateTiming(),
    );
  }

  if (optedIn('gates-instructions')) {
    const { callgrindMissing } = await import('./send-instructions.js');
    const { gateInstructions, printGateRounds } = await import('./send-gates.js');
    const missing = callgrindMissing();
    if (missing) console.log(`\nInstructions per gated send: skipped, ${missing}`);
    else printGateRounds('Send with preferences and throttling (deduplication) vs without, instructions per send under callgrind (main thread: JavaScript and SQLite), alternating rounds:', (n) => `${Math.round(n / 1000)}k`, await gateInstructions());
  }

  if (wants('postgres')) {
    const unreachable = await postgresUnreachable();
    if (unreachable) console.log(`\nPostgreSQL send path: skipped, ${unreachable}`);
    else printPostgresSend(await postgresSend());
  }

  if (wants('seeded')) printSeeded(await seededSqlite());

  if (wants('seeded-postgres')) {
    const unreachable = await postgresUnreachable();
    if (unreachable) console.log(`\nCost as the work grows on PostgreSQL: skipped, ${unreachable}`);
    else {
      const empty = await createDatabase('empty');
      const seeded = await createDatabase('seeded');
      try {
        printSeeded(await seededPostgres(empty.url, seeded.url));
      } finally {
        await empty.drop();
        await seeded.drop();
      }
    }
  }

  if (wants('email')) {
    const EMAILS = BENCH.emails;
    const rounds = BENCH.emailRounds;
    const r = await emailRounds(EMAILS, rounds, BENCH.emailWarm);
    const show = (runs: EmailRun[]) => {
      const cpus = runs.flatMap((x) => (x.cpuUsPerMail === undefined ? [] : [x.cpuUsPerMail]));
      const mains = runs.flatMap((x) => (x.mainCpuUsPerMail === undefined ? [] : [x.mainCpuUsPerMail]));
      return `${fmt(median(runs.map((x) => x.rate)), 0)} msg/s${cpus.length ? `, ${fmt(median(cpus), 0)} µs CPU/mail` : ''}${mains.length ? ` (main thread ${fmt(median(mains), 0)} µs)` : ''} (rounds: ${runs.map((x) => fmt(x.rate, 0)).join(' ')})`;
    };
    console.log(`\nEmail delivery into a local SMTP sink (TCP_NODELAY), ${EMAILS} messages after ${BENCH.emailWarm} unmeasured ones (JIT warm-up), pool of 5 connections x 100 messages, sender in its own process, ${rounds} rounds (medians):`);
    for (const [sender, runs] of Object.entries(r.raw)) console.log(`  raw ${sender.padEnd(29)}: ${show(runs)}${sender === r.fastest ? ' (fastest: the baseline)' : ''}`);
    console.log(`  Clarion (API -> queue -> worker) : ${show(r.clarion)}`);
    console.log(`  ratio ${fmt(median(r.ratios) * 100)}% of the fastest raw sender, ${r.fastest}, median of the rounds' ratios (target >= 80%); rounds (%): ${percents(r.ratios)}`);
  }

  if (optedIn('email-instructions')) {
    const { callgrindMissing } = await import('./send-instructions.js');
    const { emailInstructions, printEmailInstructions } = await import('./email-instructions.js');
    const missing = callgrindMissing();
    if (missing) console.log(`\nInstructions per mail: skipped, ${missing}`);
    else {
      const before = BENCH.beforeRef ? checkoutBefore(BENCH.beforeRef) : undefined;
      try {
        printEmailInstructions(await emailInstructions(before));
      } finally {
        before?.remove();
      }
    }
  }

  if (wants('broadcast')) printBroadcast(await broadcastBench());

  if (wants('webhooks')) {
    const { runWebhookBench, printWebhookBench } = await import('./webhooks.js');
    printWebhookBench(await runWebhookBench());
  }

  if (optedIn('webhook-instructions')) {
    const { callgrindMissing } = await import('./send-instructions.js');
    const { webhookInstructions, printWebhookInstructions } = await import('./webhook-instructions.js');
    const missing = callgrindMissing();
    if (missing) console.log(`\nWebhook instructions: skipped (${missing})`);
    else {
      const before = BENCH.beforeRef ? checkoutBefore(BENCH.beforeRef) : undefined;
      try {
        printWebhookInstructions(await webhookInstructions(before));
      } finally {
        before?.remove();
      }
    }
  }

  if (wants('webpush')) {
    const { runWebPushBench, printWebPushBench } = await import('./web-push.js');
    printWebPushBench(await runWebPushBench());
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
