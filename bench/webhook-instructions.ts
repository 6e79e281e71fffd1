// BENCH_ONLY=webhook-instructions: CPU instructions per signed webhook delivery, counted by
// valgrind's callgrind, for Clarion's side of the webhooks bench (ledger events to every attempt
// recorded), the raw undici side, and with BENCH_BEFORE_REF Clarion's side of that ref's code.
// Each side runs alone in its own process (bench/webhooks.ts --side), all at once: a count barely
// moves with the host's load, where rates and CPU time swing (see send-instructions.ts).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Checkout } from './before.js';
import { CLARION_LOG_LEVEL, ROOT } from './lib.js';
import { dumpTotals, stopChild } from './send-instructions.js';

/** Events per round (each to every endpoint) and measured rounds after one warm-up round: BENCH_CG_WEBHOOK_EVENTS, BENCH_CG_WEBHOOK_ROUNDS. */
const EVENTS = Number(process.env.BENCH_CG_WEBHOOK_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_CG_WEBHOOK_ROUNDS ?? 3);

export interface WebhookInstructionCount {
  name: string;
  deliveries: number;
  /** On the main thread (JavaScript, SQLite, HTTP). */
  mainPerDelivery: number;
  /** On every thread (with the WAL checkpoint thread, V8's compiler threads). */
  allPerDelivery: number;
}

export async function webhookInstructions(before?: Checkout): Promise<WebhookInstructionCount[]> {
  const sides = [countSide('raw undici 7 dispatch', 'raw'), countSide('Clarion, this checkout', 'clarion')];
  if (before) sides.push(countSide(`Clarion, before (${before.ref} = ${before.commit.slice(0, 10)})`, 'clarion', before.root));
  return Promise.all(sides);
}

async function countSide(name: string, side: 'raw' | 'clarion', root?: string): Promise<WebhookInstructionCount> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-callgrind-wh-'));
  const out = path.join(dir, 'callgrind.out');
  const args = [path.join(ROOT, 'bench/webhooks.ts'), '--side', side, '--hold', '--events', String(EVENTS), '--rounds', String(ROUNDS), ...(root ? ['--root', root] : [])];
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${out}`, process.execPath, '--single-threaded-gc', '--import', 'tsx', ...args],
    { cwd: ROOT, env: { ...process.env, LOG_LEVEL: CLARION_LOG_LEVEL }, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let text = '';
  const waiting: { word: string; resolve: (line: string) => void }[] = [];
  child.stdout.on('data', (d: Buffer) => {
    text += d.toString();
    for (const w of [...waiting]) {
      const line = text.split('\n').find((l) => l.startsWith(w.word));
      if (line) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  let errors = '';
  child.stderr.on('data', (d: Buffer) => (errors += d.toString()));
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${name}: exited ${code}: ${errors.slice(-2000)}`))));
  const until = (word: string) => Promise.race([new Promise<string>((resolve) => waiting.push({ word, resolve })), exited]);
  try {
    await until('WARM');
    const control = (...a: string[]) =>
      new Promise<void>((resolve, reject) => spawn('callgrind_control', [...a, String(child.pid)], { stdio: 'ignore' }).once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`callgrind_control ${a.join(' ')}: ${code}`)))));
    await control('--zero');
    await control('--instr=on');
    child.stdin.write('go\n');
    const done = await until('DONE');
    await control('--dump=counted');
    await control('--instr=off');
    const deliveries = Number(done.split(' ')[1]);
    const counted = dumpTotals(dir, 1);
    child.stdin.write('end\n');
    return { name, deliveries, mainPerDelivery: counted.main / deliveries, allPerDelivery: counted.all / deliveries };
  } finally {
    await stopChild(child);
    // BENCH_CG_KEEP=<dir>: the callgrind files of each side for callgrind_annotate (native frames: SQLite, V8's builtins, libc).
    if (process.env.BENCH_CG_KEEP) fs.cpSync(dir, path.join(process.env.BENCH_CG_KEEP, `${side}${root ? '-before' : ''}`), { recursive: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function printWebhookInstructions(counts: WebhookInstructionCount[]): void {
  const k = (n: number) => `${Math.round(n / 1000)}k`;
  console.log(`\nInstructions per signed webhook delivery (callgrind, each side alone, ${ROUNDS} rounds of ${EVENTS} deliveries counted after one, LOG_LEVEL=${CLARION_LOG_LEVEL}):`);
  for (const c of counts) console.log(`  ${c.name.padEnd(44)}: main thread ${k(c.mainPerDelivery)}, all threads ${k(c.allPerDelivery)} (${c.deliveries} deliveries)`);
  const [raw, clarion, before] = counts;
  console.log(`  Clarion vs raw (main thread): raw is ${((raw.mainPerDelivery / clarion.mainPerDelivery) * 100).toFixed(1)}% of Clarion's count (all threads ${((raw.allPerDelivery / clarion.allPerDelivery) * 100).toFixed(1)}%)`);
  if (before) console.log(`  after vs before (main thread): ${((clarion.mainPerDelivery / before.mainPerDelivery) * 100).toFixed(1)}% (all threads ${((clarion.allPerDelivery / before.allPerDelivery) * 100).toFixed(1)}%)`);
}
