// BENCH_ONLY=email-instructions: CPU instructions per delivered mail of the email scenario's worker
// process (bench/email-delivery.ts), counted by valgrind's callgrind, for this checkout and (with
// BENCH_BEFORE_REF) the code before a change, both at once. Rates and CPU times swing with other
// work on a shared host; a count barely does. Sends are accepted by an API-only process (not under
// valgrind); the worker delivers BENCH_CG_MAIL_WARM of them uncounted (the JIT's tiers, the MIME
// and render threads' start), then BENCH_CG_MAILS more are accepted and counted from the first
// accepted to the last at the sink.
import { type ChildProcess, spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Checkout } from './before.js';
import { acceptShippedMails, sink } from './email-delivery.js';
import { CLARION_LOG_LEVEL, ROOT, freePort, start, stop } from './lib.js';
import { dumpTotals, stopChild } from './send-instructions.js';

const WARM = Number(process.env.BENCH_CG_MAIL_WARM ?? 600);
const COUNTED = Number(process.env.BENCH_CG_MAILS ?? 1000);

export interface MailInstructionCount {
  name: string;
  mails: number;
  /** Instructions per mail on the worker's main thread (JavaScript, SQLite, the SMTP client). */
  mainPerMail: number;
  /** On every thread: the MIME and render threads, V8's compiler threads, libuv's pool, the WAL checkpoint thread. */
  allPerMail: number;
}

export async function emailInstructions(before?: Checkout): Promise<MailInstructionCount[]> {
  const sides = [countSide('this checkout', ROOT)];
  if (before) sides.push(countSide(`before (${before.ref} = ${before.commit.slice(0, 10)})`, before.root));
  return Promise.all(sides);
}

async function countSide(name: string, root: string): Promise<MailInstructionCount> {
  const s = await sink();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-callgrind-mail-'));
  const env = { CLARION_DATA_DIR: path.join(dir, 'data'), SMTP_URL: s.url, DATABASE_URL: '' };
  const port = await freePort();
  const api = await start('src/main.ts', ['serve'], { ...env, PORT: String(port), CLARION_ROLE: 'api' }, /API key\s+clarion_sk_\S+/, root);
  let worker: ChildProcess | undefined;
  try {
    const key = /API key\s+(clarion_sk_\S+)/.exec(api.out)![1];
    let accepted = 0;
    const accept = async (upTo: number) => {
      await acceptShippedMails(port, key, accepted, upTo);
      accepted = upTo;
    };
    await accept(WARM);
    const out = path.join(dir, 'callgrind.out');
    worker = spawn(
      'valgrind',
      ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${out}`, process.execPath, '--single-threaded-gc', '--import', 'tsx', path.join(root, 'src/main.ts'), 'worker'],
      { cwd: root, env: { ...process.env, CLARION_INBOUND_SMTP_PORT: 'off', ...env, LOG_LEVEL: CLARION_LOG_LEVEL }, stdio: 'ignore' },
    );
    await s.waitFor(WARM, 1_800_000);
    const control = (...args: string[]) => execFileSync('callgrind_control', [...args, String(worker!.pid)], { stdio: 'ignore' });
    control('--zero');
    control('--instr=on');
    await accept(WARM + COUNTED);
    await s.waitFor(WARM + COUNTED, 3_600_000);
    control('--dump=counted');
    control('--instr=off');
    const counted = dumpTotals(dir, 1);
    const keep = process.env.BENCH_CG_KEEP;
    if (keep) {
      fs.mkdirSync(keep, { recursive: true });
      for (const f of fs.readdirSync(dir).filter((f) => f.startsWith('callgrind.out.'))) fs.copyFileSync(path.join(dir, f), path.join(keep, `${name.split(' ')[0]}-${f}`));
    }
    return { name, mails: COUNTED, mainPerMail: counted.main / COUNTED, allPerMail: counted.all / COUNTED };
  } finally {
    if (worker) await stopChild(worker);
    await stop(api.child);
    await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function printEmailInstructions(counts: MailInstructionCount[]): void {
  const k = (n: number) => `${Math.round(n / 1000)}k`;
  console.log(`\nInstructions per delivered mail, email scenario's worker (callgrind, ${COUNTED} mails counted after ${WARM}, LOG_LEVEL=${CLARION_LOG_LEVEL}):`);
  for (const c of counts) console.log(`  ${c.name.padEnd(36)}: main thread ${k(c.mainPerMail)}, all threads ${k(c.allPerMail)}`);
  if (counts.length === 2) console.log(`  this checkout vs before: main thread ${((counts[0].mainPerMail / counts[1].mainPerMail) * 100).toFixed(1)}%, all threads ${((counts[0].allPerMail / counts[1].allPerMail) * 100).toFixed(1)}%`);
}
