import net from 'node:net';
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
  }, 120_000);

  it('migrate is idempotent and bad configuration exits 2 with a clear message', async () => {
    const first = await runCli(['migrate'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('up to date');
    const bad = await runCli(['migrate'], { ...env, DATABASE_URL: 'mysql://nope' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('DATABASE_URL');
  });
});

// Tried as a newcomer would (issue 14, item 4): every mistake is one line per problem, no stack.
describe('clarion CLI: help, configuration and start-up errors', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-cli-errors-'));
  const env = { CLARION_DATA_DIR: dataDir, DATABASE_URL: '' };
  afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const noStack = (text: string) => expect(text).not.toMatch(/^\s+at /m);

  it('each subcommand --help prints its usage and does nothing else', async () => {
    const untouched = path.join(dataDir, 'help-only');
    const commands = ['serve', 'worker', 'migrate', 'init', 'token'];
    const runs = await Promise.all(commands.map((command) => runCli([command, '--help'], { CLARION_DATA_DIR: untouched, DATABASE_URL: '', PORT: '1' })));
    runs.forEach(({ code, stdout, stderr }, i) => {
      expect(code, commands[i]).toBe(0);
      expect(stdout.split('\n')[0]).toMatch(new RegExp(`^clarion ${commands[i]}\\b`));
      expect(stderr).toBe('');
    });
    // Nothing was migrated, served or created.
    expect(fs.existsSync(untouched)).toBe(false);
    const unknown = await runCli(['deploy', '--help'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('unknown command "deploy"');
  }, 120_000);

  it('every bad value is one line naming the variable and what it accepts, exit 2', async () => {
    const { code, stdout, stderr } = await runCli(['serve'], { ...env, PORT: '70000', LOG_LEVEL: 'verbose', CLARION_SECRET_KEY: 'short', CLARION_ALLOW_PRIVATE_NETWORKS: 'maybe' });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    noStack(stderr);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines).toEqual(
      expect.arrayContaining([
        'clarion: PORT must be an integer from 0 to 65535, got "70000"',
        'clarion: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
        expect.stringMatching(/^clarion: CLARION_SECRET_KEY must be a key of 32 bytes or more, as hex .* got "short"$/),
        expect.stringMatching(/^clarion: CLARION_ALLOW_PRIVATE_NETWORKS must be true or false .* got "maybe"$/),
      ]),
    );
  });

  it('an unreachable database is one line, exit 1, without its password', async () => {
    const closed = await freePort();
    const { code, stderr } = await runCli(['migrate'], { ...env, DATABASE_URL: `postgres://clarion:hunter2@127.0.0.1:${closed}/clarion` });
    expect(code).toBe(1);
    noStack(stderr);
    expect(stderr.trim().split('\n')).toEqual([
      `clarion: cannot use the database at postgres://clarion:***@127.0.0.1:${closed}/clarion: connect ECONNREFUSED 127.0.0.1:${closed} (ECONNREFUSED); check DATABASE_URL and that PostgreSQL is running`,
    ]);
  });

  it('a taken inbound SMTP port is one line naming its setting, with no stack and no warning before it', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    try {
      const failed = await runCli(['serve'], { CLARION_DATA_DIR: fs.mkdtempSync(path.join(dataDir, 'smtp-')), DATABASE_URL: '', PORT: String(await freePort()), CLARION_INBOUND_SMTP_PORT: String(takenPort), LOG_LEVEL: 'info' });
      expect(failed.code).toBe(1);
      noStack(failed.stderr);
      noStack(failed.stdout);
      expect(failed.stdout).not.toContain('inbound SMTP connection error');
      expect(failed.stderr.trim().split('\n')).toEqual([
        `clarion: cannot listen: the inbound SMTP port 127.0.0.1:${takenPort} is in use; set CLARION_INBOUND_SMTP_PORT to a free port, or to off`,
      ]);
    } finally {
      taken.close();
    }
  }, 120_000);

  it('prints the bootstrap key even when the first start then fails (port taken), and the key works on the next start', async () => {
    const fresh = fs.mkdtempSync(path.join(dataDir, 'first-'));
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    let key: string;
    try {
      const failed = await runCli(['serve'], { CLARION_DATA_DIR: fresh, DATABASE_URL: '', PORT: String(takenPort), CLARION_INBOUND_SMTP_PORT: 'off' });
      expect(failed.code).toBe(1);
      key = /API key\s+(clarion_sk_\S+)/.exec(failed.stdout)![1];
      noStack(failed.stderr);
      expect(failed.stderr).toMatch(new RegExp(`^clarion: cannot listen: listen EADDRINUSE: address already in use 127\\.0\\.0\\.1:${takenPort}; set PORT`, 'm'));
    } finally {
      taken.close();
    }
    const port = await freePort();
    const child = spawnCli(['serve'], { CLARION_DATA_DIR: fresh, DATABASE_URL: '', PORT: String(port), CLARION_INBOUND_SMTP_PORT: 'off', LOG_LEVEL: 'info' });
    try {
      const out = await waitForOutput(child, /listening on/);
      expect(out).not.toContain('clarion_sk_');
      const res = await fetch(`http://127.0.0.1:${port}/account`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  }, 120_000);
});
