import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import nodemailer from 'nodemailer';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, spawnCli, waitForOutput } from '../helpers/process.js';
import { eventually } from '../helpers/wait.js';

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });

// `clarion serve` (role all) starts the inbound SMTP server with its workers and closes it on SIGTERM.
describe('clarion serve with inbound email', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-inbound-'));
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('receives mail on CLARION_INBOUND_SMTP_PORT and stops listening on shutdown', async () => {
    const [port, smtpPort] = [await freePort(), await freePort()];
    const child = spawnCli(['serve'], { CLARION_DATA_DIR: dataDir, DATABASE_URL: '', PORT: String(port), CLARION_INBOUND_SMTP_PORT: String(smtpPort), CLARION_INBOUND_DOMAIN: 'mail.example.test' });
    let exited: Promise<unknown> | null = new Promise((r) => child.on('exit', r));
    try {
      const out = await waitForOutput(child, /API key\s+clarion_sk_\S+/);
      const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
      const base = `http://127.0.0.1:${port}`;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const created = await fetch(`${base}/addresses`, { method: 'POST', headers, body: JSON.stringify({ prefix: 'hello' }) });
      expect((await created.json()).address.fullAddress).toBe('hello@mail.example.test');

      const mta = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true });
      await mta.sendMail({ from: 'ada@example.com', to: 'hello@mail.example.test', subject: 'Hi there', text: 'hello' });
      mta.close();
      const emails = await eventually(async () => {
        const body = (await (await fetch(`${base}/inbound-emails`, { headers })).json()) as { emails: { fields: Record<string, unknown> }[] };
        return body.emails.length ? body.emails : undefined;
      }, 10_000, 'inbound email');
      expect(emails[0].fields.email_inbound_subject).toBe('Hi there');

      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      exited = null;
      expect(await refused(smtpPort)).toBe(true);
    } finally {
      if (exited) {
        child.kill('SIGTERM');
        await exited;
      }
    }
  });
});
