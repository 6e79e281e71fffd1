// The ways the server is started give node the main thread's young generation bound, all the same
// one (MAIN_SEMI_SPACE_MB): V8 reads it only when the main isolate is created, so the process
// cannot set it for itself (src/heap-settings.ts, docs/memory.md). Likewise glibc's arena cap in the image.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { MAIN_SEMI_SPACE_MB } from '../../src/heap-settings.js';
import { STOP_GRACE_MS } from '../../src/modules/sending/delivery-runs.js';
import { ROOT } from '../helpers/process.js';

const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
const flag = `--max-semi-space-size=${MAIN_SEMI_SPACE_MB}`;

describe("the server's start commands", () => {
  it('npm start, the clarion bin, the Dockerfile and compose.yaml pass the same semi-space bound', () => {
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string>; bin: Record<string, string> };
    expect(pkg.scripts.start).toBe(`node ${flag} dist/main.js serve`);
    // The bin is dist/main.js, run through its shebang (tsc keeps src/main.ts's first line).
    expect(pkg.bin.clarion).toBe('dist/main.js');
    expect(read('src/main.ts').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${flag}`);
    expect(read('Dockerfile')).toMatch(new RegExp(`^CMD \\["node", "${flag}", "dist/main.js", "serve"\\]$`, 'm'));
    const commands = read('compose.yaml').match(/^\s+command: .*$/gm) ?? [];
    expect(commands.length).toBe(2);
    for (const command of commands) expect(command).toContain(`["node", "${flag}", "dist/main.js",`);
  });

  it("the image's environment caps glibc's malloc arenas, which the process cannot do for itself", () => {
    const runtime = read('Dockerfile').split(/^FROM /m).at(-1) ?? '';
    expect(runtime).toMatch(/^ENV [^\n]*(?:\\\n[^\n]*)*\bMALLOC_ARENA_MAX=2\b/m);
  });

  it("compose.yaml and the README's docker run give a stop the time its graceful end can take (Docker's default is 10 s)", () => {
    // Webhook requests under way end within their timeout, then the queue's and the provider
    // calls' grace run side by side (src/workers.ts, stopAll).
    const graceful = loadConfig({}).webhookTimeoutMs + STOP_GRACE_MS;
    const periods = [...read('compose.yaml').matchAll(/^ {4}stop_grace_period: (\d+)s$/gm)].map((m) => Number(m[1]) * 1000);
    expect(periods.length).toBe(2);
    for (const period of periods) expect(period).toBeGreaterThanOrEqual(graceful + 10_000);
    const timeout = /docker run --stop-timeout (\d+) /.exec(read('README.md'));
    expect(Number(timeout?.[1]) * 1000).toBeGreaterThanOrEqual(graceful + 10_000);
  });
});
