import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import { RAW_SENDERS, type RawSender } from './email-raw-sender.js';
import { CLARION_LOG_LEVEL, ROOT, freePort, start, stop } from './lib.js';

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
    waitFor: async (n: number, timeoutMs = 300_000) => {
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

/**
 * One raw sender (bench/email-raw-sender.ts) in its own process, as Clarion's worker is, into a
 * fresh sink in this one. The rate counts from the moment the sender starts its work (it says
 * START once loaded) to the last mail at the sink, not from the first mail: a sender that builds
 * every mail before sending the first (the prebuilt one) would otherwise leave the building,
 * which Clarion's worker does inside its window, out of its own.
 */
export async function rawSmtp(sender: RawSender, n: number): Promise<number> {
  const s = await sink();
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/email-raw-sender.ts')], {
      cwd: ROOT,
      env: { ...process.env, SINK_PORT: String(s.port), EMAILS: String(n), SENDER: sender },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let started = Number.NaN;
    child.stdout.on('data', (chunk: Buffer) => {
      if (Number.isNaN(started) && chunk.toString().includes('START')) started = performance.now();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await Promise.race([s.waitFor(n), exited.then((code) => s.arrivals.length < n && Promise.reject(new Error(`${sender} exited ${code} after ${s.arrivals.length}/${n} mails`)))]);
    await exited;
    if (Number.isNaN(started)) throw new Error(`${sender} never said START`);
    return (n / (s.arrivals[n - 1] - started)) * 1000;
  } finally {
    await s.close();
  }
}

/** Every raw sender in turn; the fastest is the baseline. */
export async function rawBaselines(n: number): Promise<{ rates: Record<RawSender, number>; fastest: RawSender }> {
  const rates = {} as Record<RawSender, number>;
  for (const sender of Object.keys(RAW_SENDERS) as RawSender[]) rates[sender] = await rawSmtp(sender, n);
  const fastest = (Object.keys(rates) as RawSender[]).reduce((a, b) => (rates[b] > rates[a] ? b : a));
  return { rates, fastest };
}

/**
 * Clarion: N sends accepted by an API-only process (so they all wait in the queue), then one
 * worker process delivers them. The rate counts from the first mail to the last at the sink.
 */
export async function clarionDelivery(n: number): Promise<number> {
  const s = await sink();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-mail-'));
  const env = { CLARION_DATA_DIR: dataDir, SMTP_URL: s.url, DATABASE_URL: '' };
  try {
    const port = await freePort();
    const api = await start('src/main.ts', ['serve'], { ...env, PORT: String(port), CLARION_ROLE: 'api' }, /API key\s+clarion_sk_\S+/);
    const key = /API key\s+(clarion_sk_\S+)/.exec(api.out)![1];
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < n) {
          const i = next++;
          const res = await fetch(`http://127.0.0.1:${port}/send`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ type: 'shipped', to: { id: `user${i}`, email: `user${i}@example.com` }, email: { subject: 'Your order shipped', html: HTML } }),
          });
          if (res.status !== 202) throw new Error(`send answered ${res.status}`);
        }
      }),
    );
    await stop(api.child);
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'worker'], {
      cwd: ROOT,
      env: { ...process.env, CLARION_INBOUND_SMTP_PORT: 'off', ...env, LOG_LEVEL: CLARION_LOG_LEVEL },
      stdio: 'ignore',
    });
    await s.waitFor(n);
    await stop(child);
    return rate(s.arrivals, n);
  } finally {
    await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
