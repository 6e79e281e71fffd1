import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.js';

/**
 * CommonJS packages only some deployments use, each several MB of heap once loaded
 * (docs/memory.md). (smtp-server, also loaded only where inbound SMTP runs, is an ES module
 * package: Node keeps no list of loaded ES modules to check it by.)
 */
const ON_FIRST_USE = ['@slack/web-api', 'mailparser', 'web-push', 'pg-boss'];

/**
 * In a process of its own, from the built code: the composition a `clarion serve` runs on SQLite
 * (deps, migrations, services, the HTTP app and the workers, inbound SMTP off as in the bench),
 * then `exercise` (JavaScript run in that process); prints the packages of ON_FIRST_USE loaded
 * (CommonJS modules, imported or required, are in require.cache).
 */
function loadedPackages(dataDir: string, exercise = ''): string[] {
  const dist = (file: string) => JSON.stringify(pathToFileURL(path.join(ROOT, 'dist', file)).href);
  const script = `
    import { createRequire } from 'node:module';
    const { loadConfig } = await import(${dist('config.js')});
    const { buildDeps } = await import(${dist('deps.js')});
    const { buildServices } = await import(${dist('services.js')});
    const { buildApp } = await import(${dist('app.js')});
    const { startWorkers } = await import(${dist('workers.js')});
    const deps = buildDeps(loadConfig());
    await deps.storage.migrate();
    const services = buildServices(deps);
    const app = await buildApp(deps, services);
    await app.ready();
    const workers = await startWorkers(deps, services);
    ${exercise}
    await workers.stop();
    await app.close();
    await deps.storage.close();
    const files = Object.keys(createRequire(import.meta.url).cache);
    const loaded = ${JSON.stringify(ON_FIRST_USE)}.filter((name) => files.some((f) => f.includes('/node_modules/' + name + '/')));
    console.log(JSON.stringify(loaded));
    process.exit(0);`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 90_000,
    env: { ...process.env, DATABASE_URL: '', CLARION_DATA_DIR: dataDir, CLARION_INBOUND_SMTP_PORT: 'off', LOG_LEVEL: 'warn', SMTP_URL: '' },
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as string[];
}

describe('packages loaded on first use', () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-lazy-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

  it('a started SQLite server without inbound SMTP holds none of them', () => {
    expect(loadedPackages(dataDir())).toEqual([]);
  }, 120_000);

  it('each is loaded when its feature is used', () => {
    const exercise = `
      const { SlackClients, toDeliveryError } = await import(${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/channels/slack/client.js')).href)});
      new SlackClients({ apiUrl: 'http://127.0.0.1:9/api/', logger: deps.logger }).for('xoxb-test');
      await services.inbound.receive(Buffer.from('From: a@example.com\\r\\nTo: b@example.com\\r\\nSubject: hi\\r\\n\\r\\nbody\\r\\n'), []).catch(() => undefined);`;
    expect(loadedPackages(dataDir(), exercise)).toEqual(['@slack/web-api', 'mailparser']);
  }, 120_000);
});
