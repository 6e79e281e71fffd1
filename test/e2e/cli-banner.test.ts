// What a newcomer reads at start (issue 14, items 3 and 5): where mail and texts go, and that
// `clarion init` makes environments whose in-app feeds need the user hash.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { sha256Hex } from '../../src/secrets.js';
import { freePort, runCli, spawnCli, waitForOutput } from '../helpers/process.js';

const dataDirs: string[] = [];
const freshDataDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-banner-'));
  dataDirs.push(dir);
  return dir;
};
afterAll(() => dataDirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

/** Runs `clarion serve` until `pattern` is printed; answers what it printed by then. */
async function serveUntil(env: NodeJS.ProcessEnv, pattern: RegExp, whileUp?: (out: string) => Promise<void>): Promise<string> {
  const child = spawnCli(['serve'], env);
  try {
    const out = await waitForOutput(child, pattern);
    await whileUp?.(out);
    return out;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.on('exit', r));
  }
}

describe('the start banner says where messages go', () => {
  it('in development: the outbox and the development carrier, with the routes that show them', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = { CLARION_DATA_DIR: freshDataDir(), DATABASE_URL: '', PORT: String(port), SMTP_URL: '', TWILIO_ACCOUNT_SID: '', TWILIO_AUTH_TOKEN: '' };
    // First start: the block with the bootstrap key.
    const first = await serveUntil(env, /texts, calls .*\n/, async (out) => {
      const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
      // The routes the banner names answer with that key.
      for (const route of ['/outbox', '/dev-carrier/messages']) {
        expect((await fetch(`${base}${route}`, { headers: { authorization: `Bearer ${key}` } })).status, route).toBe(200);
      }
    });
    expect(first).toMatch(new RegExp(`mail +local outbox, not sent: GET ${base}/outbox \\(set SMTP_URL to send\\)`));
    expect(first).toMatch(new RegExp(`texts, calls +development carrier, not sent: GET ${base}/dev-carrier/messages`));

    // Later starts: the listening line (at info) says the same.
    const later = await serveUntil({ ...env, LOG_LEVEL: 'info' }, /listening on/);
    const line = JSON.parse(later.split('\n').find((l) => l.includes('listening on'))!) as { msg: string; mail: string; texts: string };
    expect(line.mail).toBe(`local outbox, not sent: GET ${base}/outbox (set SMTP_URL to send)`);
    expect(line.texts).toContain(`GET ${base}/dev-carrier/messages`);
    expect(line.msg).toContain(`mail: local outbox`);
  }, 60_000);

  it('in production: the SMTP host and the carrier host, never their credentials', async () => {
    const port = await freePort();
    const env = {
      CLARION_DATA_DIR: freshDataDir(),
      DATABASE_URL: '',
      PORT: String(port),
      SMTP_URL: 'smtp://mailer:smtp-password-123@127.0.0.1:2599',
      TWILIO_ACCOUNT_SID: 'AC0123456789abcdef0123456789abcdef',
      TWILIO_AUTH_TOKEN: 'twilio-token-456',
      TWILIO_BASE_URL: 'http://127.0.0.1:9',
    };
    const out = await serveUntil({ ...env, LOG_LEVEL: 'info' }, /texts, calls .*\n/);
    expect(out).toMatch(/mail +SMTP server 127\.0\.0\.1:2599\n/);
    expect(out).toMatch(/texts, calls +Twilio at 127\.0\.0\.1:9\n/);
    expect(out).not.toContain('smtp-password-123');
    expect(out).not.toContain('mailer');
    expect(out).not.toContain('twilio-token-456');
  }, 60_000);
});

describe('a first start stopped before the API answers', () => {
  it('prints the bootstrap account\'s key all the same (SIGTERM once the account is committed)', async () => {
    const dataDir = freshDataDir();
    const child = spawnCli(['serve'], { CLARION_DATA_DIR: dataDir, DATABASE_URL: '', PORT: String(await freePort()), LOG_LEVEL: 'warn' });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    // The account is committed, then the app is built (seconds): stopped in between.
    const storedKeys = () => {
      try {
        const db = new Database(path.join(dataDir, 'clarion.sqlite'), { readonly: true, fileMustExist: true });
        try {
          return db.prepare('SELECT key_hash FROM api_keys').all() as { key_hash: string }[];
        } finally {
          db.close();
        }
      } catch {
        return [];
      }
    };
    let keys = storedKeys();
    while (keys.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      keys = storedKeys();
    }
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const printed = /API key\s+(clarion_sk_\S+)/.exec(out)?.[1];
    expect(printed, out).toBeDefined();
    expect(keys.map((k) => k.key_hash)).toEqual([sha256Hex(printed!)]);
    // The banner of a start that ended before the API answered: without where messages go.
    expect(out).not.toContain('Where messages go');
  }, 60_000);
});

describe('clarion init', () => {
  it('creates its environment in in-app secure mode, and prints how to turn it off', async () => {
    const env = { CLARION_DATA_DIR: freshDataDir(), DATABASE_URL: '' };
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const init = await runCli(['init', '--name', 'Secure'], { ...env, PORT: String(port) });
    expect(init.code).toBe(0);
    const field = (name: string) => new RegExp(`^ +${name} +(\\S+)$`, 'm').exec(init.stdout)![1];
    const [apiKey, clientId, clientSecret] = [field('API key'), field('clientId'), field('clientSecret')];
    expect(init.stdout).toContain('In-app secure mode is on');
    const patchUrl = `${base}/environments/${clientId}`;
    expect(init.stdout).toContain(`-d '{"secureMode":false}' ${patchUrl}`);

    await serveUntil({ ...env, PORT: String(port), LOG_LEVEL: 'info' }, /listening on/, async () => {
      const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
      const listed = (await (await fetch(`${base}/environments`, { headers })).json()) as { clientId: string; secureMode: boolean }[];
      expect(listed.find((e) => e.clientId === clientId)?.secureMode).toBe(true);
      const feed = (credentials: string) =>
        fetch(`${base}/${clientId}/users/alice/notifications/INAPP_WEB`, { headers: { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` } });
      // Without the user hash another user's feed cannot be read; with it, it can.
      expect((await feed(`${clientId}:alice`)).status).toBe(401);
      expect((await feed(`${clientId}:alice:${userHash(clientSecret, 'alice')}`)).status).toBe(200);

      // The printed way to turn it off.
      const off = await fetch(patchUrl, { method: 'PATCH', headers, body: JSON.stringify({ secureMode: false }) });
      expect(off.status).toBe(200);
      expect((await off.json()).secureMode).toBe(false);
      expect((await feed(`${clientId}:alice`)).status).toBe(200);
    });
  }, 60_000);
});
