// Web push: sends per second of Clarion's adapter (cached VAPID JWT per origin, SSRF-guarded
// keep-alive transport) against the raw web-push library's sendNotification, on the same
// payloads to the same local https push service (in its own process), in the same run.
// Alone: npx tsx bench/web-push.ts [sends] [concurrency]
import { type ChildProcess, spawn } from 'node:child_process';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import webpush from 'web-push';
import { WebPushSender, webPushPayload } from '../src/channels/push/web-push.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = path.resolve(path.dirname(SELF), '..');

interface EndpointInfo {
  origin: string;
  ca: string;
  subscriptions: { endpoint: string; keys: { p256dh: string; auth: string } }[];
}

export interface WebPushBenchResult {
  sends: number;
  concurrency: number;
  rawPerSecond: number;
  clarionPerSecond: number;
  /** clarion / raw */
  ratio: number;
  failures: { raw: number; clarion: number };
}

/** The push service: verifies every VAPID JWT and header, decrypts one payload in 25 (all of them would make it the bottleneck). */
async function endpointMode(): Promise<void> {
  const { startPushEndpoint } = await import('../test/helpers/push-endpoint.js');
  const endpoint = await startPushEndpoint({ tls: true, decryptEvery: 25 });
  const subscriptions = Array.from({ length: 20 }, () => endpoint.subscribe().sub);
  process.stdout.write(`READY ${JSON.stringify({ origin: endpoint.origin, ca: endpoint.ca, subscriptions })}\n`);
  process.stdin.resume();
  process.stdin.on('data', (d) => {
    if (String(d).includes('stats')) {
      process.stdout.write(`STATS ${JSON.stringify({ accepted: endpoint.accepted().length, rejected: endpoint.rejected.length, lastRejection: endpoint.rejected.at(-1) })}\n`);
    }
  });
  process.stdin.on('end', () => void endpoint.close().then(() => process.exit(0)));
}

function startEndpoint(): Promise<{ child: ChildProcess; info: EndpointInfo; stats: () => Promise<{ accepted: number; rejected: number }> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', SELF, '--endpoint'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
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
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`push endpoint exited ${code}`)));
    void nextLine().then((line) => {
      if (!line.startsWith('READY ')) return reject(new Error(`push endpoint said: ${line}`));
      resolve({
        child,
        info: JSON.parse(line.slice(6)) as EndpointInfo,
        async stats() {
          const reply = nextLine();
          child.stdin.write('stats\n');
          return JSON.parse((await reply).slice(6));
        },
      });
    });
  });
}

/** Runs `total` sends with at most `concurrency` in flight; returns sends per second and failures. */
async function drive(total: number, concurrency: number, one: (i: number) => Promise<boolean>): Promise<{ perSecond: number; failures: number }> {
  let next = 0;
  let failures = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        if (!(await one(i).catch(() => false))) failures++;
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return { perSecond: total / seconds, failures };
}

export async function runWebPushBench(options: { sends?: number; concurrency?: number; rounds?: number } = {}): Promise<WebPushBenchResult> {
  const sends = options.sends ?? Number(process.env.BENCH_WEB_PUSH_SENDS ?? 2000);
  const concurrency = options.concurrency ?? Number(process.env.BENCH_WEB_PUSH_CONCURRENCY ?? 50);
  const rounds = options.rounds ?? 3;
  const { child, info, stats } = await startEndpoint();
  const vapid = { ...webpush.generateVAPIDKeys(), subject: 'mailto:bench@clarion.test' };
  const payloads = Array.from({ length: 100 }, (_, i) =>
    webPushPayload({ title: `Order ${i} shipped`, message: `Your order #${i} is on its way`, icon: 'https://cdn.example.com/icon.png', url: `https://shop.example.com/orders/${i}` }),
  );
  const subscription = (i: number) => info.subscriptions[i % info.subscriptions.length];
  const ttlSeconds = 86_400;

  // The raw library with a keep-alive agent trusting the local CA (its default agent is keep-alive on Node 20 too).
  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca: info.ca });
  const raw = (i: number) =>
    webpush
      .sendNotification(subscription(i), payloads[i % payloads.length], { vapidDetails: vapid, TTL: ttlSeconds, urgency: 'normal', agent })
      .then((r) => r.statusCode === 201);
  const sender = new WebPushSender({ now: () => new Date(), allowPrivateNetworks: true, ttlSeconds, urgency: 'normal', ca: info.ca, connectionsPerOrigin: concurrency });
  const ours = (i: number) => sender.send(vapid, subscription(i), payloads[i % payloads.length]).then((o) => o.ok);

  try {
    await drive(200, concurrency, raw);
    await drive(200, concurrency, ours);
    let best = { raw: 0, clarion: 0 };
    const failures = { raw: 0, clarion: 0 };
    // Alternate the two so neither always runs on a warmer or cooler machine; keep the best round of each.
    for (let round = 0; round < rounds; round++) {
      const r = await drive(sends, concurrency, raw);
      const c = await drive(sends, concurrency, ours);
      failures.raw += r.failures;
      failures.clarion += c.failures;
      best = { raw: Math.max(best.raw, r.perSecond), clarion: Math.max(best.clarion, c.perSecond) };
    }
    const seen = await stats();
    if (seen.rejected > 0) throw new Error(`the push service refused ${seen.rejected} pushes: ${JSON.stringify(seen)}`);
    return { sends, concurrency, rawPerSecond: best.raw, clarionPerSecond: best.clarion, ratio: best.clarion / best.raw, failures };
  } finally {
    agent.destroy();
    await sender.close();
    child.stdin!.end();
  }
}

export function printWebPushBench(result: WebPushBenchResult): void {
  const fmt = (n: number) => n.toFixed(0);
  console.log(`\nWeb push to a local https push service (VAPID + aes128gcm), ${result.sends} sends, concurrency ${result.concurrency}:`);
  console.log(`  raw web-push sendNotification : ${fmt(result.rawPerSecond)} sends/s`);
  console.log(`  Clarion adapter               : ${fmt(result.clarionPerSecond)} sends/s`);
  console.log(`  ratio ${(result.ratio * 100).toFixed(1)}% of raw web-push (target >= 80%)`);
  if (result.failures.raw || result.failures.clarion) console.log(`  note: failed sends: raw ${result.failures.raw}, Clarion ${result.failures.clarion}`);
}

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  if (process.argv.includes('--endpoint')) await endpointMode();
  else {
    const [sends, concurrency] = process.argv.slice(2).map(Number);
    printWebPushBench(await runWebPushBench({ ...(sends ? { sends } : {}), ...(concurrency ? { concurrency } : {}) }));
  }
}
