import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, freePort, spawnCli, waitForOutput } from '../helpers/process.js';

/** Debian's chromium package; .ci/run installs it. */
const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(ROOT, '.test-results', 'docs-page.png');

// The built server (as `npm start` runs it) on the embedded default, and /docs in headless Chromium.
describe('the docs page in a browser', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-docs-'));
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-chromium-'));
  let server: ChildProcess | undefined;
  let browser: BrowserContext | undefined;
  let origin: string;

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    server = spawnCli(['serve'], { CLARION_DATA_DIR: dataDir, DATABASE_URL: '', HOST: '127.0.0.1', PORT: String(port) });
    await waitForOutput(server, /API key\s+clarion_sk_/);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.on('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(profileDir, { recursive: true, force: true });
  });

  it('renders every operation of the OpenAPI document from the server alone', async () => {
    // A failure, not a skip, without the browser: CI installs it.
    if (!fs.existsSync(CHROMIUM)) {
      throw new Error(`Chromium is not installed at ${CHROMIUM}: run \`apt-get install -y chromium\` (.ci/run installs it).`);
    }
    const context = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 1400 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    browser = context;
    // Every request of the page is recorded; any to another address is refused before it leaves.
    const requested: string[] = [];
    await context.route('**/*', (route) => {
      const url = route.request().url();
      requested.push(url);
      return new URL(url).origin === origin ? route.continue() : route.abort('blockedbyclient');
    });
    const document = (await (await fetch(`${origin}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const operations = Object.values(document.paths).reduce((n, item) => n + Object.keys(item).length, 0);
    expect(operations).toBeGreaterThan(100);

    const page = await context.newPage();
    const response = await page.goto(`${origin}/docs`);
    expect(response?.status()).toBe(200);
    // Its own scripts only, framed by no other site; no upgrade of its plain-http requests to https.
    const headers = response!.headers();
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(headers['content-security-policy']).toContain('script-src');
    expect(headers['content-security-policy']).not.toContain('upgrade-insecure-requests');
    // The page opens on the tags (docExpansion 'none'); every tag of the document is listed.
    const tags = [...new Set(Object.values(document.paths).flatMap((item) => Object.values(item).flatMap((op) => (op as { tags?: string[] }).tags ?? [])))];
    const tagHeaders = page.locator('.opblock-tag');
    await tagHeaders.first().waitFor({ state: 'visible', timeout: 20_000 });
    expect(await tagHeaders.allTextContents()).toEqual(tags);
    // Opening a tag lists its operations: sending has POST /send.
    const sendingOps = Object.entries(document.paths).flatMap(([, item]) => Object.values(item).filter((op) => ((op as { tags?: string[] }).tags ?? []).includes('sending')));
    await page.locator('.opblock-tag[data-tag="sending"]').click();
    const send = page.locator('.opblock-post .opblock-summary-path[data-path="/send"]');
    await send.waitFor({ state: 'visible', timeout: 20_000 });
    expect(await page.locator('.opblock').count()).toBe(sendingOps.length);
    await page.screenshot({ path: SCREENSHOT });
    expect(await page.locator('.opblock-summary-method').first().isVisible()).toBe(true);
    await expect(send.textContent()).resolves.toBe('/send');
    expect(await page.locator('.info .title').textContent()).toContain('Clarion');
    expect(fs.statSync(SCREENSHOT).size).toBeGreaterThan(10_000);

    expect(requested).toContain(`${origin}/docs/json`);
    expect(requested.filter((url) => new URL(url).origin !== origin)).toEqual([]);
  }, 60_000);
});
