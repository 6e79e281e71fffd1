// The request lines a served process writes to stdout at the default level (src/log-destination.ts
// gathers them per event loop turn): every request's line arrives, whole, and before the
// shutdown line that follows them.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, spawnCli, waitForOutput } from '../helpers/process.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-request-lines-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

describe('request lines on stdout', () => {
  it('writes one whole line per request, concurrent ones included, before the shutdown line', async () => {
    const port = await freePort();
    const child = spawnCli(['serve'], { CLARION_DATA_DIR: dataDir, DATABASE_URL: '', PORT: String(port), LOG_LEVEL: 'info' });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      // A first start prints the banner once the API answers.
      await waitForOutput(child, /Try: curl .*\n/, 60_000);
      // 40 requests at once, answered in few turns: their lines are handed over together.
      const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => fetch(`http://127.0.0.1:${port}/nowhere/${i}`).then((r) => r.status)));
      expect(new Set(statuses)).toEqual(new Set([404]));
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const lines = out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; req?: { url: string }; res?: { statusCode: number } });
    const requestLines = lines.filter((l) => l.msg === 'request completed');
    expect(requestLines.map((l) => l.req!.url).sort()).toEqual(Array.from({ length: 40 }, (_, i) => `/nowhere/${i}`).sort());
    expect(requestLines.every((l) => l.res!.statusCode === 404)).toBe(true);
    const shutdown = lines.findIndex((l) => l.msg === 'shutting down');
    expect(shutdown).toBeGreaterThan(lines.lastIndexOf(requestLines.at(-1)!));
  }, 90_000);
});
