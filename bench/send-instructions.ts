// BENCH_ONLY=send-instructions: CPU instructions per accepted POST /send, counted by valgrind's
// callgrind, for this checkout and (with BENCH_BEFORE_REF) the code before a change. Unlike rates
// and CPU time, an instruction count barely moves when other processes load the machine, so it
// compares two versions of the send path on a busy host. The API process alone
// (CLARION_ROLE=api): workers in the same process run on timers and give way by the wall clock,
// which callgrind (about 50 times slower) distorts.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import type { Checkout } from './before.js';
import { BENCH_RATE_LIMITS, CLARION_LOG_LEVEL, ROOT, bannerKey, freePort, waitForStatus } from './lib.js';
import { BENCH, SEND_BODY } from './settings.js';

/** Requests before counting (the JIT's tiers) and counted; BENCH_CG_WARM, BENCH_CG_REQUESTS. */
const WARM = Number(process.env.BENCH_CG_WARM ?? 3000);
const COUNTED = Number(process.env.BENCH_CG_REQUESTS ?? 3000);

/**
 * Garbage collection on the main thread only: V8's parallel scavenges share their work among
 * whichever threads run, and valgrind runs one thread at a time, so the main thread's share (and
 * its count) moved by up to a fifth between runs of the same code.
 */
const NODE_FLAGS = ['--single-threaded-gc'];

export interface InstructionCount {
  name: string;
  requests: number;
  /** Instructions per request on the thread that answers requests (JavaScript, SQLite commits, HTTP). */
  mainPerRequest: number;
  /** On every thread: V8's compiler threads, libuv's pool, the WAL checkpoint thread. */
  allPerRequest: number;
  /** What the clock alone ran on the main thread in as much time, per request (taken out of mainPerRequest). */
  idleMainPerRequest: number;
}

/** Why the scenario cannot run here, or undefined. */
export function callgrindMissing(): string | undefined {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['--version'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'valgrind (with callgrind_control) is not installed';
  }
}

/** Counts this checkout and, if given, the checkout before a change, both at once (a count does not depend on the other's load). */
export async function sendInstructions(before?: Checkout): Promise<InstructionCount[]> {
  const sides = [countSide('this checkout', ROOT)];
  if (before) sides.push(countSide(`before (${before.ref} = ${before.commit.slice(0, 10)})`, before.root));
  return Promise.all(sides);
}

async function countSide(name: string, root: string): Promise<InstructionCount> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-callgrind-'));
  const port = await freePort();
  const out = path.join(dir, 'callgrind.out');
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${out}`, process.execPath, ...NODE_FLAGS, '--import', 'tsx', path.join(root, 'src/main.ts'), 'serve'],
    {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: CLARION_LOG_LEVEL, PORT: String(port), CLARION_ROLE: 'api', CLARION_INBOUND_SMTP_PORT: 'off', ...BENCH_RATE_LIMITS, CLARION_DATA_DIR: path.join(dir, 'data'), DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let banner = '';
  const collect = (d: Buffer) => {
    if (banner.length < 16_384) banner += d.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.resume();
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitForStatus(base, 600_000);
    const key = await bannerKey(() => banner, 600_000);
    const send = (amount: number) =>
      autocannon({
        url: `${base}/send`,
        method: 'POST',
        connections: BENCH.connections,
        amount,
        timeout: 120,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(SEND_BODY),
      });
    await send(WARM);
    const control = (...args: string[]) => execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'ignore' });
    // The counted requests, then as long again without any: what runs by the clock alone (timers,
    // caches that expire, the checkpoint thread) costs per second of valgrind's slow time, and is
    // taken out of the count in proportion to the time the requests took.
    control('--zero');
    control('--instr=on');
    const began = performance.now();
    const counted = await send(COUNTED);
    const busyMs = performance.now() - began;
    control('--dump=counted');
    await new Promise((resolve) => setTimeout(resolve, busyMs));
    control('--instr=off');
    control('--dump=idle');
    const requests = counted['2xx'] + counted.non2xx;
    const load = dumpTotals(dir, 1);
    const idle = dumpTotals(dir, 2);
    const perRequest = (busy: number, quiet: number) => Math.max(0, busy - quiet) / requests;
    return { name, requests, mainPerRequest: perRequest(load.main, idle.main), allPerRequest: perRequest(load.all, idle.all), idleMainPerRequest: idle.main / requests };
  } finally {
    await stopChild(child);
    // BENCH_CG_KEEP=<dir>: the callgrind files of each side for callgrind_annotate (native frames: SQLite, V8's builtins, libc).
    if (process.env.BENCH_CG_KEEP) fs.cpSync(dir, path.join(process.env.BENCH_CG_KEEP, root === ROOT ? 'this-checkout' : 'before'), { recursive: true, filter: (source) => !source.startsWith(path.join(dir, 'data')) });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Instructions of dump `part` (files callgrind.out.<part>-<thread>): on the main thread (1) and on all. */
export function dumpTotals(dir: string, part: number): { main: number; all: number } {
  let all = 0;
  let main = 0;
  for (const file of fs.readdirSync(dir).filter((f) => f.startsWith(`callgrind.out.${part}-`))) {
    const total = Number(/^totals:\s+(\d+)/m.exec(fs.readFileSync(path.join(dir, file), 'utf8'))?.[1] ?? 0);
    all += total;
    if (file.endsWith('-01')) main = total;
  }
  return { main, all };
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

export function printSendInstructions(counts: InstructionCount[]): void {
  const k = (n: number) => `${Math.round(n / 1000)}k`;
  console.log(`\nInstructions per accepted POST /send (callgrind, CLARION_ROLE=api, ${BENCH.connections} connections, ${COUNTED} requests counted after ${WARM}, LOG_LEVEL=${CLARION_LOG_LEVEL}):`);
  for (const c of counts) console.log(`  ${c.name.padEnd(36)}: main thread ${k(c.mainPerRequest)}, all threads ${k(c.allPerRequest)} (${c.requests} answered; the clock alone, taken out: ${k(c.idleMainPerRequest)} on the main thread)`);
  if (counts.length === 2) console.log(`  main thread after vs before: ${((counts[0].mainPerRequest / counts[1].mainPerRequest) * 100).toFixed(1)}% `);
}
