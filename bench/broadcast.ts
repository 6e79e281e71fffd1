// BENCH_ONLY=broadcast: one email broadcast to N users (BENCH_BROADCAST_SIZES, default 10000 and
// 100000) by the embedded default (one process, API and workers, SQLite) into a local SMTP sink,
// next to the raw baseline in the same run: nodemailer's pooled transport (5 connections, the
// pool Clarion uses) sending as many mails into the same sink, plain and DKIM-signed (Clarion
// signs every mail of a verified sender domain). Prints the total time from the send request to
// the last mail at the sink, the rate, and the process's resident memory: before the send and its
// peak (VmHWM). The signed baseline runs twice, with the key as a PEM string (nodemailer parses it
// for every mail) and as one parsed KeyObject; the faster is the one Clarion is compared with. The server is the built one (dist/main.js, as `npm start` runs it): under tsx the
// compiler alone holds some 60 MB more. BENCH_MEMORY_PROBE=1 runs the server with
// bench/memory-probe.ts loaded (NODE_OPTIONS=--require, measurement only) and prints where its
// resident memory was at the peak: each isolate's heap by space, the process's mappings by kind.
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { STARTUP_COLLECTION_DELAY_MS } from '../src/heap-settings.js';
import { rawSmtp, sink } from './email-delivery.js';
import { ROOT, cpuMicros, freePort, fmt, start, stop } from './lib.js';
import { memoryAtPeak, memoryProbeEnv } from './memory-probe.js';

const DOMAIN = 'bench.example';
const HTML = '<h1>Hello {{ user.id }}</h1><p>Our spring release is out. <a href="https://example.com/release">Read the notes</a>.</p>';

export interface BroadcastRun {
  size: number;
  /** From the send request to the last mail at the sink. */
  seconds: number;
  rate: number;
  peakRssMb: number;
  /** Resident memory of the idle server before the send, once its start-up collection has run (STARTUP_COLLECTION_DELAY_MS). */
  idleRssMb: number;
  raw: number;
  /** The faster of the two DKIM-signed raw senders: the same-work baseline. */
  rawDkim: number;
  /** nodemailer's pool given the key as its documentation shows (a PEM string, parsed again for every mail). */
  rawDkimPem: number;
  /** The same given one parsed KeyObject. */
  rawDkimParsed: number;
  /** CPU time per mail (µs), every thread of the process over the same window as the rate: Clarion's server, the raw senders. */
  cpuUsPerMail?: number;
  /** Clarion's main thread alone (the event loop: queue, SQL, SMTP connections). */
  mainCpuUsPerMail?: number;
  rawCpuUsPerMail?: number;
  rawDkimCpuUsPerMail?: number;
  /** BENCH_MEMORY_PROBE: where the server's resident memory was at its peak. */
  memoryAtPeak?: string[];
}

export const broadcastSizes = () => (process.env.BENCH_BROADCAST_SIZES ?? '10000,100000').split(',').map(Number);

/** A process's resident memory (VmRSS) or its peak so far (VmHWM), in MB. */
function memoryMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const kb = Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  return kb / 1024;
}

/** `size` users with an email each, in one statement (a recursive CTE), as bench/seed.ts loads a grown store. */
function seedUsers(file: string, accountId: string, envId: string, size: number): void {
  const db = new Database(file);
  db.pragma('busy_timeout = 10000');
  const now = new Date().toISOString();
  db.prepare(
    `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${size - 1})
     insert into users (env_id, id, account_id, email, last_seen_time, created_at, updated_at)
     select ?, 'reader-' || i, ?, 'reader-' || i || '@example.com', ?, ?, ? from n`,
  ).run(envId, accountId, now, now, now);
  db.close();
}

/** Marks the account's sender domain verified, as a DNS check would once its records are published. */
function verifyDomain(file: string, domain: string): void {
  const db = new Database(file);
  db.pragma('busy_timeout = 10000');
  db.prepare(`update sender_domains set verified_at = ?, status = 'SUCCESS' where domain = ?`).run(new Date().toISOString(), domain);
  db.close();
}

export async function clarionBroadcast(
  size: number,
  root = ROOT,
): Promise<{ seconds: number; peakRssMb: number; idleRssMb: number; cpuUsPerMail?: number; mainCpuUsPerMail?: number; memoryAtPeak?: string[] }> {
  const s = await sink();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-broadcast-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const probe = process.env.BENCH_MEMORY_PROBE ? memoryProbeEnv(dataDir) : undefined;
  // The rate cap far above what one process sends: the bench measures throughput, not the cap.
  const server = await start('dist/main.js', ['serve'], { CLARION_DATA_DIR: dataDir, SMTP_URL: s.url, DATABASE_URL: '', PORT: String(port), CLARION_BROADCAST_RATE: '100000', ...probe?.env }, /API key\s+clarion_sk_\S+/, root);
  try {
    const key = /API key\s+(clarion_sk_\S+)/.exec(server.out)![1];
    const accountId = /accountId\s+(\S+)/.exec(server.out)![1];
    const envId = /clientId\s+(\S+)/.exec(server.out)![1];
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(base + url, { method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
      const json = (await res.json()) as Record<string, unknown>;
      if (res.status >= 300) throw new Error(`${method} ${url} answered ${res.status}: ${JSON.stringify(json)}`);
      return json;
    };
    const file = path.join(dataDir, 'clarion.sqlite');
    await call('POST', '/domains', { sender: DOMAIN });
    verifyDomain(file, DOMAIN);
    seedUsers(file, accountId, envId, size);
    const created = await call('POST', '/broadcasts', {
      name: `bench ${size}`,
      type: 'bench_broadcast',
      audience: { filter: { email: { $exists: true } } },
      fromName: 'Bench',
      fromAddress: `news@${DOMAIN}`,
      subject: 'Spring release',
      html: HTML,
    });
    const id = created.broadcastId as string;
    // Idle as a server that has run a while is: after its one collection of what the start left
    // behind, and the seconds V8 takes to give the freed pages back.
    await new Promise((r) => setTimeout(r, STARTUP_COLLECTION_DELAY_MS + 6000));
    const idleRssMb = memoryMb(server.child.pid!, 'VmRSS');
    const cpu0 = cpuMicros(server.child.pid);
    const main0 = cpuMicros(server.child.pid, 'main');
    const began = performance.now();
    await call('POST', `/broadcasts/${id}/send`);
    await s.waitFor(size, 3_600_000);
    const cpu1 = cpuMicros(server.child.pid);
    const main1 = cpuMicros(server.child.pid, 'main');
    const seconds = (s.arrivals[size - 1] - began) / 1000;
    for (let i = 0; (await call('GET', `/broadcasts/${id}`)).status !== 'sent'; i++) {
      if (i > 600) throw new Error('the broadcast never ended sent');
      await new Promise((r) => setTimeout(r, 100));
    }
    const peakRssMb = memoryMb(server.child.pid!, 'VmHWM');
    return {
      seconds,
      peakRssMb,
      idleRssMb,
      ...(probe ? { memoryAtPeak: memoryAtPeak(probe.out) } : {}),
      ...(cpu0 !== undefined && cpu1 !== undefined ? { cpuUsPerMail: (cpu1 - cpu0) / size } : {}),
      ...(main0 !== undefined && main1 !== undefined ? { mainCpuUsPerMail: (main1 - main0) / size } : {}),
    };
  } finally {
    await stop(server.child);
    await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function broadcastBench(): Promise<BroadcastRun[]> {
  const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-dkim-'));
  const keyFile = path.join(keyDir, 'dkim.pem');
  fs.writeFileSync(keyFile, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const dkimEnv = { RAW_FROM: `news@${DOMAIN}`, DKIM_DOMAIN: DOMAIN, DKIM_SELECTOR: 'bench', DKIM_KEY_FILE: keyFile };
  const runs: BroadcastRun[] = [];
  try {
    for (const size of broadcastSizes()) {
      const raw = await rawSmtp('nodemailer pool', size);
      const rawDkimPem = await rawSmtp('nodemailer pool', size, dkimEnv);
      const rawDkimParsed = await rawSmtp('nodemailer pool', size, { ...dkimEnv, DKIM_KEY_PARSED: '1' });
      const rawDkim = rawDkimParsed.rate >= rawDkimPem.rate ? rawDkimParsed : rawDkimPem;
      const clarion = await clarionBroadcast(size);
      runs.push({
        size,
        seconds: clarion.seconds,
        rate: size / clarion.seconds,
        peakRssMb: clarion.peakRssMb,
        idleRssMb: clarion.idleRssMb,
        raw: raw.rate,
        rawDkim: rawDkim.rate,
        rawDkimPem: rawDkimPem.rate,
        rawDkimParsed: rawDkimParsed.rate,
        cpuUsPerMail: clarion.cpuUsPerMail,
        mainCpuUsPerMail: clarion.mainCpuUsPerMail,
        rawCpuUsPerMail: raw.cpuUsPerMail,
        rawDkimCpuUsPerMail: rawDkim.cpuUsPerMail,
        memoryAtPeak: clarion.memoryAtPeak,
      });
    }
  } finally {
    fs.rmSync(keyDir, { recursive: true, force: true });
  }
  return runs;
}

export function printBroadcast(runs: BroadcastRun[]): void {
  console.log('\nEmail broadcast into a local SMTP sink (built server, embedded SQLite, one process; raw: nodemailer pool, 5 connections, same sink):');
  for (const r of runs) {
    console.log(
      `  ${String(r.size).padStart(6)} recipients: ${fmt(r.seconds, 1)} s, ${fmt(r.rate, 0)} msg/s; raw unsigned ${fmt(r.raw, 0)} msg/s (Clarion at ${fmt((r.rate / r.raw) * 100)}%, target >= 80%), raw DKIM-signed ${fmt(r.rawDkim, 0)} msg/s (${fmt((r.rate / r.rawDkim) * 100)}%; PEM string ${fmt(r.rawDkimPem, 0)}, parsed KeyObject ${fmt(r.rawDkimParsed, 0)}); RSS ${fmt(r.idleRssMb, 0)} MB idle before the send (settled), peak ${fmt(r.peakRssMb, 0)} MB (target < 150)`,
    );
    // CPU per mail moves far less than a rate when other work shares the host (the sink's, in this process, is in none of them).
    if (r.cpuUsPerMail !== undefined) {
      console.log(`          CPU per mail, all threads: Clarion ${fmt(r.cpuUsPerMail, 0)} µs (main thread ${r.mainCpuUsPerMail !== undefined ? fmt(r.mainCpuUsPerMail, 0) : '?'} µs); raw ${r.rawCpuUsPerMail !== undefined ? fmt(r.rawCpuUsPerMail, 0) : '?'} µs, raw DKIM-signed ${r.rawDkimCpuUsPerMail !== undefined ? fmt(r.rawDkimCpuUsPerMail, 0) : '?'} µs`);
    }
    for (const line of r.memoryAtPeak ?? []) console.log(`          memory probe, ${line}`);
  }
}
