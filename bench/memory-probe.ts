// BENCH_MEMORY_PROBE=1 (bench/broadcast.ts), measurement only: where the server's resident memory is
// at its peak. The probe is loaded into the server and each of its worker threads with
// NODE_OPTIONS=--require (CommonJS, so that worker threads load it too; written to the run's data
// directory from the source below). Every 100 ms each isolate appends its heap's physical size by
// space to `${MEMORY_PROBE_OUT}.t<threadId>`; the main thread adds the process's resident memory and,
// at each new peak, writes /proc/self/smaps summed by kind of mapping to
// `${MEMORY_PROBE_OUT}.smaps.json`. It changes nothing the server does beyond reading these counters.
import fs from 'node:fs';
import path from 'node:path';
import { fmt } from './lib.js';

const PROBE_SOURCE = `'use strict';
const fs = require('node:fs');
const v8 = require('node:v8');
const { isMainThread, threadId } = require('node:worker_threads');

const out = process.env.MEMORY_PROBE_OUT;
const MB = 1024 * 1024;

/**
 * Which of the server's threads this is, from the CommonJS packages it loaded so far: the WAL
 * checkpointer requires better-sqlite3, a render thread LiquidJS; the MIME thread is the other one
 * (its packages do not show in require.cache). The last sample's answer is the one to read.
 */
function role() {
  if (isMainThread) return 'main';
  const loaded = Object.keys(require.cache).join('\\n');
  if (loaded.includes('better-sqlite3')) return 'WAL checkpointer';
  if (loaded.includes('liquidjs')) return 'render';
  return 'MIME';
}

/** Sums the resident kB of /proc/self/smaps by kind of mapping. */
function smapsByKind() {
  const kinds = {};
  let kind = null;
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\\S+) \\S+ \\S+ \\S+\\s*(.*)$/.exec(line);
    if (head) {
      const [, start, end, perms, name] = head;
      const kb = (parseInt(end, 16) - parseInt(start, 16)) / 1024;
      if (name === '[heap]') kind = 'malloc: main arena';
      else if (name.startsWith('/')) kind = name.endsWith('.node') ? 'files: addons' : /\\/node$/.test(name) ? 'files: node binary' : 'files: other';
      else if (name) kind = \`other \${name}\`;
      else if (perms.includes('x')) kind = 'anonymous: code (rwx)';
      else if (kb === 256) kind = 'anonymous: V8 pages (256 kB)';
      else if (perms === 'rw-p' && kb <= 65536 && parseInt(start, 16) % (64 * MB) === 0) kind = "malloc: threads' arenas";
      else kind = 'anonymous: other';
      continue;
    }
    const rss = /^Rss:\\s+(\\d+) kB/.exec(line);
    if (rss && kind) kinds[kind] = (kinds[kind] ?? 0) + Number(rss[1]);
  }
  return kinds;
}

if (out) {
  // Collections of this isolate since it started: young (scavenges), full (mark-compact), and
  // the time they took on this thread (what a smaller young generation costs shows here).
  const gc = { young: 0, full: 0, ms: 0 };
  const { PerformanceObserver, constants } = require('node:perf_hooks');
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = entry.detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gc.young++;
      else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.full++;
      gc.ms += entry.duration;
    }
  }).observe({ entryTypes: ['gc'] });
  let peakKb = 0;
  const sample = () => {
    const name = role();
    const spaces = {};
    for (const s of v8.getHeapSpaceStatistics()) if (s.physical_space_size > 0) spaces[s.space_name] = s.physical_space_size / MB;
    const record = { t: Date.now(), role: name, heapMb: v8.getHeapStatistics().total_physical_size / MB, spaces, gc };
    if (isMainThread) {
      const status = fs.readFileSync('/proc/self/status', 'utf8');
      const rssKb = Number(/VmRSS:\\s+(\\d+)/.exec(status)[1]);
      record.rssMb = rssKb / 1024;
      record.fileMb = Number(/RssFile:\\s+(\\d+)/.exec(status)[1]) / 1024;
      if (rssKb > peakKb + 1024) {
        peakKb = rssKb;
        fs.writeFileSync(\`\${out}.smaps.json\`, JSON.stringify({ t: record.t, rssMb: record.rssMb, kb: smapsByKind() }));
      }
    }
    fs.appendFileSync(\`\${out}.t\${threadId}\`, \`\${JSON.stringify(record)}\\n\`);
  };
  setInterval(sample, 100).unref();
}
`;

/** Writes the probe into `dir` and answers the environment that loads it into a server started there. */
export function memoryProbeEnv(dir: string): { env: NodeJS.ProcessEnv; out: string } {
  const file = path.join(dir, 'memory-probe.cjs');
  fs.writeFileSync(file, PROBE_SOURCE);
  const out = path.join(dir, 'memory-probe');
  return { env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${file}`.trim(), MEMORY_PROBE_OUT: out }, out };
}

interface ProbeSample {
  t: number;
  role?: string;
  heapMb: number;
  spaces: Record<string, number>;
  rssMb?: number;
  fileMb?: number;
  gc?: { young: number; full: number; ms: number };
}

/** What bench/memory-probe.cjs recorded, at the main thread's sample of highest resident memory. */
export function memoryAtPeak(out: string): string[] {
  const dir = path.dirname(out);
  const threads = fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(`${path.basename(out)}.t`))
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as ProbeSample));
  const main = threads.find((samples) => samples[0]?.role === 'main');
  if (!main) return ['memory probe: no samples of the main thread'];
  const peak = main.reduce((a, b) => ((b.rssMb ?? 0) > (a.rssMb ?? 0) ? b : a));
  const mb = (n: number) => fmt(n, 1);
  const isolates = threads
    .map((samples) => {
      const near = samples.reduce((a, b) => (Math.abs(b.t - peak.t) < Math.abs(a.t - peak.t) ? b : a));
      const role = samples[samples.length - 1].role ?? 'thread';
      if (Math.abs(near.t - peak.t) > 500) return `${role}: not running (at most ${mb(Math.max(...samples.map((s) => s.heapMb)))} MB)`;
      const { new_space: young = 0, old_space: old = 0, code_space: code = 0 } = near.spaces;
      return `${role} ${mb(near.heapMb)} MB (young ${mb(young)}, old ${mb(old)}, code ${mb(code)})`;
    })
    .sort();
  const lines = [`at the peak (${mb(peak.rssMb ?? 0)} MB resident, ${mb(peak.fileMb ?? 0)} file-backed), V8 heaps: ${isolates.join('; ')}`];
  const collections = threads
    .map((samples) => {
      const last = samples[samples.length - 1];
      return last.gc ? `${last.role ?? 'thread'} ${last.gc.young} young, ${last.gc.full} full, ${fmt(last.gc.ms / 1000, 1)} s` : '';
    })
    .filter(Boolean)
    .sort();
  if (collections.length) lines.push(`collections over the process's life (each thread's last sample): ${collections.join('; ')}`);
  const smapsFile = `${out}.smaps.json`;
  if (fs.existsSync(smapsFile)) {
    const { kb } = JSON.parse(fs.readFileSync(smapsFile, 'utf8')) as { kb: Record<string, number> };
    const kinds = Object.entries(kb)
      .filter(([, v]) => v >= 512)
      .sort(([, a], [, b]) => b - a)
      .map(([k, v]) => `${k} ${mb(v / 1024)}`);
    lines.push(`mappings (MB): ${kinds.join(', ')}`);
  }
  return lines;
}
