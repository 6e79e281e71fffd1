import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, runCli, spawnCli, waitForOutput } from '../helpers/process.js';

// The newcomer's path: start on the embedded default, use the printed key with plain HTTP.
describe('clarion CLI on the embedded default', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-cli-'));
  const env = { CLARION_DATA_DIR: dataDir, DATABASE_URL: '' };
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('serve creates a bootstrap account, prints its key, and the key works over HTTP', async () => {
    const port = await freePort();
    const child = spawnCli(['serve'], { ...env, PORT: String(port) });
    try {
      const out = await waitForOutput(child, /API key\s+clarion_sk_\S+/);
      const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
      expect(out).toContain(`http://127.0.0.1:${port}`);
      const base = `http://127.0.0.1:${port}`;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

      const env2 = await fetch(`${base}/environments`, { method: 'POST', headers, body: JSON.stringify({ title: 'Staging' }) });
      expect(env2.status).toBe(200);
      expect((await env2.json()).title).toBe('Staging');

      const put = await fetch(`${base}/users/alice`, { method: 'POST', headers, body: JSON.stringify({ id: 'alice', email: 'alice@example.com' }) });
      expect(put.status).toBe(200);
      const got = await fetch(`${base}/users/alice`, { headers });
      expect(got.status).toBe(200);
      expect(await got.json()).toMatchObject({ id: 'alice', email: 'alice@example.com' });
      expect(fs.existsSync(path.join(dataDir, 'clarion.sqlite'))).toBe(true);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  it('does not create a second bootstrap account on restart', async () => {
    const port = await freePort();
    const child = spawnCli(['serve'], { ...env, PORT: String(port), LOG_LEVEL: 'info' });
    try {
      const out = await waitForOutput(child, /listening on/);
      expect(out).not.toContain('clarion_sk_');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  it('init --json prints one JSON object whose key authenticates', async () => {
    const { code, stdout } = await runCli(['init', '--json', '--name', 'Scripted'], env);
    expect(code).toBe(0);
    const created = JSON.parse(stdout.trim());
    expect(Object.keys(created).sort()).toEqual(['accountId', 'apiKey', 'clientId', 'clientSecret']);
    expect(created.apiKey).toMatch(/^clarion_sk_/);

    const port = await freePort();
    const child = spawnCli(['serve'], { ...env, PORT: String(port), LOG_LEVEL: 'info' });
    try {
      await waitForOutput(child, /listening on/);
      const res = await fetch(`http://127.0.0.1:${port}/account`, { headers: { authorization: `Bearer ${created.apiKey}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ accountId: created.accountId, name: 'Scripted' });

      const token = await runCli(['token', '--account', created.accountId, '--ttl', '60'], env);
      expect(token.code).toBe(0);
      const jwt = token.stdout.trim();
      const viaJwt = await fetch(`http://127.0.0.1:${port}/account`, { headers: { authorization: `Bearer ${jwt}` } });
      expect((await viaJwt.json()).accountId).toBe(created.accountId);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  it('migrate is idempotent and bad configuration exits 2 with a clear message', async () => {
    const first = await runCli(['migrate'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('up to date');
    const bad = await runCli(['migrate'], { ...env, DATABASE_URL: 'mysql://nope' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('DATABASE_URL');
  });
});
