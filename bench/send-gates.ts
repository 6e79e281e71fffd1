// BENCH_ONLY=gates: the cost of a send to a user with preferences and a throttled type (and one
// that also deduplicates) next to a send without them, in the same process and the same run:
// accepted through the HTTP routes, routed and delivered (in-app) by the delivery worker
// (bench/gates-driver.ts). Rounds alternate plain / throttled / deduplicated; the ratio is the
// median of the rounds' ratios of CPU time per send (process CPU, all threads), which moves
// much less than a rate when other processes load the host. BENCH_ONLY=gates-instructions
// counts instructions per send under callgrind instead (alternating rounds too): a count
// barely moves under load at all.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import type { GateVariant } from './gates-driver.js';
import { ROOT, fmt, median, percents } from './lib.js';
import { BENCH } from './settings.js';
import { dumpTotals } from './send-instructions.js';

const VARIANTS: GateVariant[] = ['plain', 'throttled', 'deduplicated'];
/** Sends per variant and round: BENCH_GATES_SENDS (timing), BENCH_GATES_CG_SENDS (callgrind). */
const SENDS = Number(process.env.BENCH_GATES_SENDS ?? 1000);
const CG_SENDS = Number(process.env.BENCH_GATES_CG_SENDS ?? 100);
const CG_ROUNDS = Number(process.env.BENCH_GATES_CG_ROUNDS ?? 4);
/** Uncounted rounds of each variant first: V8's compiler threads are busy for a while, and their share of the count is noise. */
const CG_WARM = Number(process.env.BENCH_GATES_CG_WARM ?? 2);
/** A directory to keep the callgrind dumps in (one per counted round, named after its variant), for callgrind_annotate. */
const CG_KEEP = process.env.BENCH_GATES_CG_KEEP;

export interface GateRounds {
  /** Per variant, per round: the measure per send (CPU µs, or instructions on the main thread). */
  perSend: Record<GateVariant, number[]>;
  /** Under callgrind: instructions per send on every thread (render threads, V8's compiler threads, libuv's pool). */
  allThreadsPerSend?: Record<GateVariant, number[]>;
  sends: number;
  /** Deliveries made per variant (every send, or the variants did not do the same work). */
  delivered: Record<GateVariant, number>;
  wallMsPerSend?: Record<GateVariant, number[]>;
}

/** The driver process and a line reader on its stdout. */
class Driver {
  private readonly lines: AsyncIterator<string>;
  constructor(readonly child: ChildProcess) {
    this.lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  static start(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Driver {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
    return new Driver(child);
  }

  async next(prefix: string): Promise<string[]> {
    for (;;) {
      const { value, done } = await this.lines.next();
      if (done) throw new Error(`the gates driver exited before "${prefix}"`);
      if (value.startsWith(prefix)) return value.trim().split(/\s+/);
    }
  }

  /** A full garbage collection, outside what is measured. */
  async collect(): Promise<void> {
    this.child.stdin!.write('gc\n');
    await this.next('collected');
  }

  async round(variant: GateVariant, sends: number): Promise<{ cpuUs: number; wallMs: number }> {
    this.child.stdin!.write(`round ${variant} ${sends}\n`);
    const [, , cpu, wall] = await this.next('done');
    return { cpuUs: Number(cpu), wallMs: Number(wall) };
  }

  async quit(): Promise<Record<GateVariant, number>> {
    this.child.stdin!.write('quit\n');
    const delivered = {} as Record<GateVariant, number>;
    for (const _ of VARIANTS) {
      const [, variant, n] = await this.next('delivered');
      delivered[variant as GateVariant] = Number(n);
    }
    await new Promise((resolve) => (this.child.exitCode !== null ? resolve(null) : this.child.once('exit', resolve)));
    return delivered;
  }
}

const empty = () => ({ plain: [], throttled: [], deduplicated: [] }) as Record<GateVariant, number[]>;

/** CPU time per send, BENCH_ROUNDS alternating rounds after one unmeasured round of each. */
export async function gateTiming(): Promise<GateRounds> {
  const driver = Driver.start(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(ROOT, 'bench/gates-driver.ts')]);
  try {
    await driver.next('ready');
    for (const variant of VARIANTS) await driver.round(variant, SENDS);
    const perSend = empty();
    const wallMsPerSend = empty();
    for (let round = 0; round < BENCH.rounds; round++) {
      for (const variant of VARIANTS) {
        await driver.collect();
        const { cpuUs, wallMs } = await driver.round(variant, SENDS);
        perSend[variant].push(cpuUs / SENDS);
        wallMsPerSend[variant].push(wallMs / SENDS);
      }
    }
    const delivered = await driver.quit();
    return { perSend, wallMsPerSend, sends: SENDS * (BENCH.rounds + 1), delivered };
  } finally {
    driver.child.kill('SIGKILL');
  }
}

/** Instructions per send under callgrind: CG_ROUNDS alternating rounds after one uncounted round of each. */
export async function gateInstructions(): Promise<GateRounds> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-callgrind-gates-'));
  const driver = Driver.start('valgrind', [
    '--quiet',
    '--tool=callgrind',
    '--instr-atstart=no',
    '--separate-threads=yes',
    `--callgrind-out-file=${path.join(dir, 'callgrind.out')}`,
    process.execPath,
    // As in send-instructions.ts: garbage collection on the main thread only, for steady counts.
    '--single-threaded-gc',
    '--expose-gc',
    '--import',
    'tsx',
    path.join(ROOT, 'bench/gates-driver.ts'),
  ]);
  const control = (...args: string[]) => execFileSync('callgrind_control', [...args, String(driver.child.pid)], { stdio: 'ignore' });
  try {
    await driver.next('ready');
    for (let round = 0; round < CG_WARM; round++) for (const variant of VARIANTS) await driver.round(variant, CG_SENDS);
    const perSend = empty();
    const allThreadsPerSend = empty();
    let dump = 0;
    for (let round = 0; round < CG_ROUNDS; round++) {
      for (const variant of VARIANTS) {
        await driver.collect();
        control('--zero');
        control('--instr=on');
        await driver.round(variant, CG_SENDS);
        control(`--dump=${variant}`);
        control('--instr=off');
        const totals = dumpTotals(dir, ++dump);
        perSend[variant].push(totals.main / CG_SENDS);
        allThreadsPerSend[variant].push(totals.all / CG_SENDS);
      }
    }
    const delivered = await driver.quit();
    return { perSend, allThreadsPerSend, sends: CG_SENDS * (CG_ROUNDS + CG_WARM), delivered };
  } finally {
    driver.child.kill('SIGKILL');
    if (CG_KEEP) {
      fs.mkdirSync(CG_KEEP, { recursive: true });
      fs.cpSync(dir, CG_KEEP, { recursive: true });
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Per round, a variant's measure over the plain one's in the same round. */
const ratios = (r: GateRounds, variant: GateVariant) => r.perSend[variant].map((x, i) => x / r.perSend.plain[i]);

export function printGateRounds(title: string, unit: (n: number) => string, r: GateRounds): void {
  console.log(`\n${title}`);
  for (const variant of VARIANTS) {
    const wall = r.wallMsPerSend ? `, wall ${fmt(median(r.wallMsPerSend[variant]) * 1000, 0)} µs/send` : '';
    const line = `  ${variant.padEnd(13)}: ${unit(median(r.perSend[variant]))} per send (median of rounds: ${r.perSend[variant].map((x) => unit(x)).join(' ')})${wall}, ${r.delivered[variant]} of ${r.sends} delivered`;
    console.log(line);
    if (r.allThreadsPerSend) console.log(`  ${''.padEnd(13)}  all threads ${unit(median(r.allThreadsPerSend[variant]))} (rounds: ${r.allThreadsPerSend[variant].map((x) => unit(x)).join(' ')})`);
  }
  for (const variant of ['throttled', 'deduplicated'] as const) {
    const each = ratios(r, variant);
    console.log(`  ${variant} vs plain: ${fmt(median(each) * 100)}% (median of the rounds' ratios; target <= 115%); rounds (%): ${percents(each)}`);
    if (r.allThreadsPerSend) {
      const all = r.allThreadsPerSend[variant].map((x, i) => x / r.allThreadsPerSend!.plain[i]);
      console.log(`  ${variant} vs plain, all threads: ${fmt(median(all) * 100)}%; rounds (%): ${percents(all)}`);
    }
  }
}
