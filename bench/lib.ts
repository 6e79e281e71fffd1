import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';

export const ROOT = path.resolve(import.meta.dirname, '..');

export { freePort } from '../test/helpers/process.js';

/**
 * Clarion's log level in the benchmarks: LOG_LEVEL of the bench's environment, else the
 * server's default (`info`, what users run). `LOG_LEVEL=warn npm run bench` measures without
 * request logs.
 */
export const CLARION_LOG_LEVEL = process.env.LOG_LEVEL ?? 'info';

/** Starts a TypeScript entry point in its own process and resolves once `ready` is printed. */
export function start(entry: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp): Promise<{ child: ChildProcess; out: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: CLARION_LOG_LEVEL, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (ready.test(out)) {
        // Past the banner, the log lines are drained unread, as a log collector on stdout would.
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        resolve({ child, out });
      }
    });
    child.stderr!.on('data', (d) => (err += d));
    child.on('exit', (code) => reject(new Error(`${entry} exited ${code}: ${err}`)));
  });
}

/** Resolves once GET {base}/status answers 200. */
export async function waitForStatus(base: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`${base}/status`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${base} did not come up`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
  /** Requests answered 2xx. */
  accepted: number;
}

/** autocannon: `connections` concurrent keep-alive connections for `seconds`. */
export async function load(url: string, body: unknown, headers: Record<string, string>, connections: number, seconds: number): Promise<LoadResult> {
  const result = await autocannon({
    url,
    method: 'POST',
    connections,
    duration: seconds,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    accepted: result['2xx'],
  };
}
