import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import { RAW_SENDERS, type RawSender } from './email-raw-sender.js';
import { CLARION_LOG_LEVEL, ROOT, cpuMicros, freePort, median, start, startFlags, stop } from './lib.js';

/**
 * An SMTP sink that records when each message finished arriving. TCP_NODELAY on its side: its
 * replies go out at once instead of waiting for the client's delayed ACK (smtp-server 3.21 sets
 * it too; set here so that the figures do not depend on the sink's version).
 */
export async function sink() {
  const arrivals: number[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        arrivals.push(performance.now());
        callback();
      });
    },
  });
  server.server.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    arrivals,
    // At least 5 minutes, and 20 ms a mail: a slow host's raw DKIM-signed sender ran 100,000 mails at about 200 a second.
    waitFor: async (n: number, timeoutMs = Math.max(300_000, n * 20)) => {
      const deadline = Date.now() + timeoutMs;
      while (arrivals.length < n) {
        if (Date.now() > deadline) throw new Error(`sink got ${arrivals.length}/${n}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const rate = (arrivals: number[], n: number) => ((n - 1) / (arrivals[n - 1] - arrivals[0])) * 1000;

const HTML = '<h1>Hello</h1><p>Your order has shipped. Track it in your account.</p>';

/** One sender's run: its rate, and its process's CPU time per mail over the same window (µs). */
export interface EmailRun {
  rate: number;
  cpuUsPerMail?: number;
  /** Clarion's worker: its main thread alone (the event loop: queue, SQL, SMTP connections). */
  mainCpuUsPerMail?: number;
}

/**
 * One raw sender (bench/email-raw-sender.ts) in its own process, as Clarion's worker is, into a
 * fresh sink in this one. The rate counts from the moment the sender starts its work (it says
 * START once loaded) to the last mail at the sink, not from the first mail: a sender that builds
 * every mail before sending the first (the prebuilt one) would otherwise leave the building,
 * which Clarion's worker does inside its window, out of its own.
 */
export async function rawSmtp(sender: RawSender, n: number, extraEnv: NodeJS.ProcessEnv = {}, warm = 0): Promise<EmailRun> {
  const s = await sink();
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/email-raw-sender.ts')], {
      cwd: ROOT,
      env: { ...process.env, ...extraEnv, SINK_PORT: String(s.port), EMAILS: String(n), WARM_EMAILS: String(warm), SENDER: sender },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let started = Number.NaN;
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (Number.isNaN(started) && out.includes('START')) started = performance.now();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const total = warm + n;
    await Promise.race([s.waitFor(total), exited.then((code) => s.arrivals.length < total && Promise.reject(new Error(`${sender} exited ${code} after ${s.arrivals.length}/${total} mails`)))]);
    await exited;
    if (Number.isNaN(started)) throw new Error(`${sender} never said START`);
    const cpu0 = /START (\d+)/.exec(out);
    const cpu1 = /DONE (\d+)/.exec(out);
    return { rate: (n / (s.arrivals[total - 1] - started)) * 1000, ...(cpu0 && cpu1 ? { cpuUsPerMail: (Number(cpu1[1]) - Number(cpu0[1])) / n } : {}) };
  } finally {
    await s.close();
  }
}

/** Accepts the mails of users `from` to `upTo - 1` through `POST /send` on `port`, 50 at a time (the email scenarios' load). */
export async function acceptShippedMails(port: number, key: string, from: number, upTo: number): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < upTo) {
        const i = next++;
        const res = await fetch(`http://127.0.0.1:${port}/send`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'shipped', to: { id: `user${i}`, email: `user${i}@example.com` }, email: { subject: 'Your order shipped', html: HTML } }),
        });
        if (res.status !== 200 && res.status !== 202) throw new Error(`send answered ${res.status}`);
      }
    }),
  );
}

/**
 * Clarion: N sends accepted by an API-only process (so they all wait in the queue), then one
 * worker process (the built one: `root` must be built; bench/run.ts builds this checkout) delivers them. The rate counts from the first mail to the last at the sink,
 * the worker's CPU time over the same window.
 */
export async function clarionDelivery(n: number, root = ROOT, warm = 0): Promise<EmailRun> {
  const s = await sink();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-mail-'));
  const env = { CLARION_DATA_DIR: dataDir, SMTP_URL: s.url, DATABASE_URL: '' };
  try {
    const port = await freePort();
    const api = await start('src/main.ts', ['serve'], { ...env, PORT: String(port), CLARION_ROLE: 'api' }, /API key\s+clarion_sk_\S+/, root);
    const key = /API key\s+(clarion_sk_\S+)/.exec(api.out)![1];
    await acceptShippedMails(port, key, 0, warm + n);
    await stop(api.child);
    // The built worker, as `npm start` runs the server (the broadcast scenario's too): under tsx
    // every closure made on the hot path also gets its name set (esbuild's keepNames), about 1%
    // of the worker's main thread.
    const child = spawn(process.execPath, [...startFlags(root), path.join(root, 'dist/main.js'), 'worker'], {
      cwd: root,
      env: { ...process.env, CLARION_INBOUND_SMTP_PORT: 'off', ...env, LOG_LEVEL: CLARION_LOG_LEVEL },
      stdio: 'ignore',
    });
    await s.waitFor(warm + 1);
    const cpu0 = cpuMicros(child.pid);
    const main0 = cpuMicros(child.pid, 'main');
    await s.waitFor(warm + n);
    const cpu1 = cpuMicros(child.pid);
    const main1 = cpuMicros(child.pid, 'main');
    await stop(child);
    return {
      rate: rate(s.arrivals.slice(warm), n),
      ...(cpu0 !== undefined && cpu1 !== undefined ? { cpuUsPerMail: (cpu1 - cpu0) / (n - 1) } : {}),
      ...(main0 !== undefined && main1 !== undefined ? { mainCpuUsPerMail: (main1 - main0) / (n - 1) } : {}),
    };
  } finally {
    await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export interface EmailRounds {
  /** Per raw sender, its run in each round. */
  raw: Record<RawSender, EmailRun[]>;
  clarion: EmailRun[];
  /** The raw sender with the highest median rate: the baseline. */
  fastest: RawSender;
  /** Per round, Clarion's rate divided by the baseline sender's in the same round. */
  ratios: number[];
}

/**
 * `rounds` rounds of every raw sender then Clarion. Other work on the machine moves a rate by
 * tens of percent from one minute to the next; a ratio of two runs taken in the same round is
 * steadier than one of runs minutes apart, and the median of the rounds' ratios steadier still.
 */
export async function emailRounds(n: number, rounds: number, warm = 0): Promise<EmailRounds> {
  const senders = Object.keys(RAW_SENDERS) as RawSender[];
  const raw = Object.fromEntries(senders.map((s) => [s, [] as EmailRun[]])) as Record<RawSender, EmailRun[]>;
  const clarion: EmailRun[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const sender of senders) raw[sender].push(await rawSmtp(sender, n, {}, warm));
    clarion.push(await clarionDelivery(n, ROOT, warm));
  }
  const medianRate = (runs: EmailRun[]) => median(runs.map((r) => r.rate));
  const fastest = senders.reduce((a, b) => (medianRate(raw[b]) > medianRate(raw[a]) ? b : a));
  return { raw, clarion, fastest, ratios: clarion.map((c, i) => c.rate / raw[fastest][i].rate) };
}
