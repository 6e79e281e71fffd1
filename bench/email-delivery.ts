import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { CLARION_LOG_LEVEL, ROOT, freePort, start, stop } from './lib.js';

/** An SMTP sink that records when each message finished arriving. */
async function sink() {
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

/** Raw nodemailer with the same pool Clarion uses (5 connections, 100 messages each). */
export async function rawNodemailer(n: number): Promise<number> {
  const s = await sink();
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: s.port, secure: false, ignoreTLS: true, pool: true, maxConnections: 5, maxMessages: 100 });
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      transport.sendMail({ from: 'Clarion <notifications@clarion.localhost>', to: `user${i}@example.com`, subject: 'Your order shipped', html: HTML, text: 'Hello. Your order has shipped.' }),
    ),
  );
  await s.waitFor(n);
  transport.close();
  await s.close();
  return rate(s.arrivals, n);
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
      env: { ...process.env, ...env, LOG_LEVEL: CLARION_LOG_LEVEL },
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
