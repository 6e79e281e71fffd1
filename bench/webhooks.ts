// Webhooks: signed deliveries per second from the ledger's events into a local receiver (its own
// process), against a raw undici client posting the same signed bodies to the same receiver,
// alternating rounds in the same run. Clarion's side is the whole pipeline in this process:
// dispatch of delivery_events into webhook events and deliveries, claims, signing, the
// SSRF-guarded POST, and the recording of every attempt (SQLite, WAL).
// Alone: npx tsx bench/webhooks.ts [events] [rounds]; one side: --side clarion|raw (see sideMode)
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median, percents, CLARION_LOG_LEVEL } from './lib.js';
import { type RoundResult, type Side, clarionSide, rawSide } from './webhook-sides.js';

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
  // One endpoint receives n/endpoints events, each delivered to every endpoint: deliveries = events x endpoints.
  const perRound = Math.max(1, Math.floor(events / endpoints));
  const deliveriesPerRound = perRound * endpoints;
  const clarion = await clarionSide({ urls, perRound, perEndpoint });
  const raw = rawSide({ urls, perRound, perEndpoint, secrets: clarion.secrets });
  const round = async (side: Side) => {
    await side.prepare();
    return side.round(await receiver.expect(deliveriesPerRound));
  };

  try {
    // Warm-up of both.
    await round(raw);
    await round(clarion);
    const rawRounds: RoundResult[] = [];
    const clarionRounds: RoundResult[] = [];
    for (let i = 0; i < rounds; i++) {
      rawRounds.push(await round(raw));
      clarionRounds.push(await round(clarion));
    }
    const ratios = clarionRounds.map((c, i) => c.perSecond / rawRounds[i].perSecond);
    return {
      events: deliveriesPerRound,
      endpoints,
      perEndpoint,
      rawPerSecond: median(rawRounds.map((r) => r.perSecond)),
      clarionPerSecond: median(clarionRounds.map((r) => r.perSecond)),
      rawCpuUs: median(rawRounds.map((r) => r.cpuUs)),
      clarionCpuUs: median(clarionRounds.map((r) => r.cpuUs)),
      ratio: median(ratios),
      ratios,
    };
  } finally {
    await clarion.close();
    await raw.close();
    receiver.child.stdin!.end();
  }
}

/**
 * One side alone in this process (`--side clarion|raw`, `--root <checkout>` for Clarion's code of
 * another checkout): for --cpu-prof, and for callgrind (bench/webhook-instructions.ts). With
 * `--hold`, prints WARM after the warm-up round and waits for a line on stdin before the
 * measured rounds, then prints DONE and waits for another line before exiting.
 */
async function sideMode(argv: string[]): Promise<void> {
  const arg = (name: string) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
  const which = arg('--side');
  const events = Number(arg('--events') ?? 3000);
  const rounds = Number(arg('--rounds') ?? 4);
  const endpoints = Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 4);
  const perEndpoint = Number(process.env.BENCH_WEBHOOK_ENDPOINT_CONCURRENCY ?? 16);
  const receiver = await startReceiver(endpoints);
  const urls = receiver.ports.map((p) => `http://127.0.0.1:${p}/hook`);
  const perRound = Math.max(1, Math.floor(events / endpoints));
  const clarion = await clarionSide({ urls, perRound, perEndpoint, root: arg('--root') });
  const side = which === 'raw' ? rawSide({ urls, perRound, perEndpoint, secrets: clarion.secrets }) : clarion;
  const hold = argv.includes('--hold');
  const line = () => new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
  const round = async () => {
    await side.prepare();
    return side.round(await receiver.expect(perRound * endpoints));
  };
  await round();
  if (hold) {
    process.stdout.write('WARM\n');
    await line();
  }
  // --profile-dir: a CPU profile of each measured round alone, without its preparation (the ledger events it delivers).
  const profileDir = arg('--profile-dir');
  const profiler = profileDir ? new inspector.Session() : undefined;
  profiler?.connect();
  await profiler?.post('Profiler.enable');
  const results: RoundResult[] = [];
  for (let i = 0; i < rounds; i++) {
    await side.prepare();
    const done = await receiver.expect(perRound * endpoints);
    await profiler?.post('Profiler.start');
    results.push(await side.round(done));
    if (profiler) fs.writeFileSync(path.join(profileDir!, `round-${i}.cpuprofile`), JSON.stringify((await profiler.post('Profiler.stop')).profile));
  }
  if (hold) {
    process.stdout.write(`DONE ${perRound * endpoints * rounds}\n`);
    await line();
  }
  console.error(`${which}: ${results.map((r) => `${r.perSecond.toFixed(0)}/s ${r.cpuUs.toFixed(1)} µs`).join(', ')}`);
  if (side !== clarion) await side.close();
  await clarion.close();
  receiver.child.stdin!.end();
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
  else if (process.argv.includes('--side')) {
    await sideMode(process.argv);
    process.exit(0);
  } else {
    const [events, rounds] = process.argv.slice(2).map(Number);
    printWebhookBench(await runWebhookBench({ ...(events ? { events } : {}), ...(rounds ? { rounds } : {}) }));
    process.exit(0);
  }
}
