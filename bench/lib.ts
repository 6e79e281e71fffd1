import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';

export const ROOT = path.resolve(import.meta.dirname, '..');

import { freePort } from '../test/helpers/process.js';

export { freePort };

/**
 * Clarion's log level in the benchmarks: LOG_LEVEL of the bench's environment, else the
 * server's default (`info`, what users run). `LOG_LEVEL=warn npm run bench` measures without
 * request logs.
 */
export const CLARION_LOG_LEVEL = process.env.LOG_LEVEL ?? 'info';

/**
 * The rate limits of the servers the bench runs: on, so that their cost is in what is measured,
 * but far above the thousands of requests a second it sends from one address with one key.
 */
export const BENCH_RATE_LIMITS = { CLARION_RATE_LIMIT_PER_KEY: '1000000000', CLARION_RATE_LIMIT_PER_IP: '1000000000' };

/**
 * The node flags `npm start` gives the built server in `root` (its package.json's start script:
 * `node <flags> dist/main.js serve`), so that the bench runs each checkout's server as its users
 * start it (since stop 40, the main thread's young generation bound).
 */
export function startFlags(root = ROOT): string[] {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts?: { start?: string } };
  const words = (pkg.scripts?.start ?? '').split(/\s+/);
  const entry = words.indexOf('dist/main.js');
  return words[0] === 'node' && entry > 0 ? words.slice(1, entry) : [];
}

/**
 * Starts an entry point (TypeScript through tsx, or a built .js) in its own process and resolves once `ready` is printed.
 * `root`: the checkout to run it from (the bench's own by default; a worktree of an older
 * commit for before/after comparisons).
 */
export function start(entry: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp, root = ROOT): Promise<{ child: ChildProcess; out: string }> {
  // A built entry (dist/*.js) runs as `npm start` runs it, without tsx and its compiler in memory.
  const loader = entry === 'dist/main.js' ? startFlags(root) : entry.endsWith('.js') ? [] : ['--import', 'tsx'];
  const child = spawn(process.execPath, [...loader, path.join(root, entry), ...args], {
    cwd: root,
    // The inbound SMTP server is off: several bench processes (and other checkouts) run at once.
    env: { ...process.env, LOG_LEVEL: CLARION_LOG_LEVEL, CLARION_INBOUND_SMTP_PORT: 'off', ...BENCH_RATE_LIMITS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (ready.test(out)) {
        // Past the banner, the log lines are drained unread, as a log collector on stdout would.
        child.stdout.removeAllListeners('data');
        child.stdout.resume();
        resolve({ child, out });
      }
    });
    child.stderr.on('data', (d) => (err += d));
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
  /** CPU time the server process spent per answered request (Linux, in alternate()), in µs. */
  cpuUsPerRequest?: number;
}

/**
 * CPU time (user + system, all threads) a process has used, in µs, from /proc (Linux); undefined
 * elsewhere. Unlike a rate, a process's CPU time per request barely moves when other processes
 * load the machine, so it shows what a change costs on a busy host.
 */
export function cpuMicros(pid: number | undefined, thread: 'all' | 'main' = 'all'): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // The main thread's own counters: the thread whose time bounds a one-process server's rate.
    const stat = fs.readFileSync(thread === 'main' ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1_000_000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux this bench runs on. */
const CLOCK_TICKS = 100;

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

export const fmt = (n: number, digits = 1) => n.toFixed(digits);
export const median = (xs: number[]) => {
  const sorted = [...xs].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
export const percents = (ratios: number[]) => ratios.map((r) => fmt(r * 100, 0)).join(' ');

/** A server under load: where to send, its process (frozen while another side is measured), its headers. */
export interface Target {
  name: string;
  url: string;
  child: ChildProcess;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface Rounds {
  /** Per target (same order as given): the summary over rounds and each round's result. */
  results: { summary: LoadResult; runs: LoadResult[] }[];
  /** Median over rounds of target a's rate divided by target b's in the same round, and each round's ratio. */
  ratio(a: number, b: number): { median: number; each: number[] };
}

/**
 * Measures `targets` in `rounds` alternating runs of `seconds` each (after an unmeasured ramp):
 * A, B, C, A, B, C... The machine's speed drifts by tens of percent within seconds (shared
 * host), so a ratio of two runs taken 30 s apart says little; a ratio per round, seconds apart,
 * is steadier, and the median of eight rounds steadier than of four. The processes not being
 * loaded are stopped with SIGSTOP so that nothing of them (workers draining a backlog, say) runs
 * during another's turn. The ramp also lets a process just resumed reach its steady state (its
 * workers ran at full concurrency until it sees the load again: ApiLoad).
 */
export async function alternate(targets: Target[], options: { rounds: number; seconds: number; connections: number; body: unknown; rampSeconds?: number }): Promise<Rounds> {
  const runs: LoadResult[][] = targets.map(() => []);
  const stopAll = () => targets.forEach((t) => t.child.kill('SIGSTOP'));
  try {
    for (let round = 0; round < options.rounds; round++) {
      for (const [i, t] of targets.entries()) {
        stopAll();
        t.child.kill('SIGCONT');
        const body = t.body ?? options.body;
        await load(t.url, body, t.headers ?? {}, options.connections, options.rampSeconds ?? 0.5); // ramp, not measured
        const cpu0 = cpuMicros(t.child.pid);
        const result = await load(t.url, body, t.headers ?? {}, options.connections, options.seconds);
        const cpu1 = cpuMicros(t.child.pid);
        if (cpu0 !== undefined && cpu1 !== undefined && result.accepted + result.non2xx > 0) result.cpuUsPerRequest = (cpu1 - cpu0) / (result.accepted + result.non2xx);
        runs[i].push(result);
      }
    }
  } finally {
    targets.forEach((t) => t.child.kill('SIGCONT'));
  }
  const summary = (rs: LoadResult[]): LoadResult => ({
    requestsPerSecond: median(rs.map((r) => r.requestsPerSecond)),
    p50Ms: median(rs.map((r) => r.p50Ms)),
    // The worst round's p99: the latency target holds in every round or not at all.
    p99Ms: Math.max(...rs.map((r) => r.p99Ms)),
    non2xx: rs.reduce((n, r) => n + r.non2xx, 0),
    errors: rs.reduce((n, r) => n + r.errors, 0),
    accepted: rs.reduce((n, r) => n + r.accepted, 0),
    cpuUsPerRequest: rs.every((r) => r.cpuUsPerRequest !== undefined) ? median(rs.map((r) => r.cpuUsPerRequest!)) : undefined,
  });
  return {
    results: runs.map((rs) => ({ summary: summary(rs), runs: rs })),
    ratio(a, b) {
      const each = runs[a].map((r, i) => r.requestsPerSecond / runs[b][i].requestsPerSecond);
      return { median: median(each), each };
    },
  };
}

/**
 * Starts `clarion serve` from `root`, built (dist/main.js, as `npm start` runs it: run.ts and
 * checkoutBefore build it), with `env`, and resolves once GET /status answers; `out` collects its
 * stdout until then.
 */
export async function serveClarion(env: NodeJS.ProcessEnv, root = ROOT, nodeArgs: string[] = []): Promise<{ child: ChildProcess; base: string; out: () => string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...startFlags(root), ...nodeArgs, path.join(root, 'dist/main.js'), 'serve'], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: CLARION_LOG_LEVEL, PORT: String(port), CLARION_INBOUND_SMTP_PORT: 'off', ...BENCH_RATE_LIMITS, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const collect = (d: Buffer) => {
    // Only the banner is read; past a few KB the log lines are drained unread, as a log collector would.
    if (out.length < 16_384) out += d.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`clarion serve exited ${code}: ${err}`))));
  const base = `http://127.0.0.1:${port}`;
  await Promise.race([waitForStatus(base, 120_000), exited]);
  exited.catch(() => undefined);
  return { child, base, out: () => out };
}

/**
 * The API key `clarion serve` printed when it bootstrapped an empty database. The banner comes
 * once the workers have started too, after the API answers /status (on PostgreSQL, seconds after):
 * `out` is read until it is there.
 */
export async function bannerKey(out: () => string, timeoutMs = 120_000): Promise<string> {
  const started = Date.now();
  for (;;) {
    const match = /API key\s+(clarion_sk_\S+)/.exec(out());
    if (match) return match[1];
    if (Date.now() - started > timeoutMs) throw new Error(`no API key in the banner:\n${out().slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs the CLI once from `root` (e.g. `init --json`) and returns its stdout; throws on a non-zero exit. */
export async function runClarion(args: string[], env: NodeJS.ProcessEnv, root = ROOT): Promise<string> {
  const child = spawn(process.execPath, [path.join(root, 'dist/main.js'), ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', CLARION_INBOUND_SMTP_PORT: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`clarion ${args.join(' ')} exited ${code}: ${err}`);
  return out;
}
