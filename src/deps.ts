import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import pino, { type Logger } from 'pino';
import { randomFillSync } from 'node:crypto';
import { V7Generator } from 'uuidv7';
import type { Config } from './config.js';
import { ApiLoad } from './load.js';
import { DeliveryLedger } from './modules/delivery/ledger.js';
import { InappRealtime } from './modules/inapp/inapp.realtime.js';
import { type Queue, type QueueOptions, createQueue } from './queue/index.js';
import { type RequestLines, directRequestLines, pinoRequestLines, requestLogSerializers } from './http/request-logger.js';
import { stdoutDestination } from './log-destination.js';
import { Secrets, loadRootKey } from './secrets.js';
import { type Storage, openStorage } from './storage/db.js';
import type { CoreTables } from './storage/schema.js';

import { type Clock, type Ids, systemClock } from './clock.js';

export { type Clock, type Ids, systemClock };

/** Everything a service needs, built once by the composition root and passed explicitly. */
export interface Deps {
  config: Config;
  storage: Storage;
  db: Kysely<CoreTables>;
  logger: Logger;
  /** The per-request log lines (src/http/request-logger.ts), written to the logger's destination. */
  requestLines: RequestLines;
  clock: Clock;
  ids: Ids;
  secrets: Secrets;
  /** Durable jobs in the same database (embedded queue on SQLite, pg-boss on PostgreSQL). */
  queue: Queue;
  /** How busy this process's API is; its queue gives way while it is (role all). */
  load: ApiLoad;
  /** The one writer of a message's life after acceptance (modules/delivery). */
  ledger: DeliveryLedger;
  /** This process's in-app websockets and their cross-process fan-out (routes, workers and settings share it). */
  inappRealtime: InappRealtime;
}

/**
 * UUIDv7 (package uuidv7) with its random bits drawn from a pool refilled 4 KB at a time: the
 * package's default asks the CSPRNG for a few bytes on every id, a measurable share of a send.
 * Each call makes an id source of its own (generator and pool are its state, not the module's).
 */
function pooledRandom(): { nextUint32(): number } {
  const pool = new Uint32Array(1024);
  let next = pool.length;
  return {
    nextUint32() {
      if (next === pool.length) {
        randomFillSync(pool);
        next = 0;
      }
      return pool[next++];
    },
  };
}
export function uuidIds(): Ids {
  const v7 = new V7Generator(pooledRandom());
  // The canonical 8-4-4-4-12 lowercase text, as UUID.toString() writes it, built as one flat
  // string: toString() joins 36 pieces into a rope that every later use (a log line, JSON, a
  // statement parameter) flattens again; two ids per send made it about 3% of the request
  // (measured with callgrind, issue 11).
  const text = new Array<number>(36).fill(DASH);
  return {
    uuid: () => {
      const bytes = v7.generate().bytes;
      let at = 0;
      for (let i = 0; i < 16; i++) {
        if (i === 4 || i === 6 || i === 8 || i === 10) at++;
        text[at++] = HEX_DIGITS[bytes[i] >>> 4];
        text[at++] = HEX_DIGITS[bytes[i] & 0xf];
      }
      return String.fromCharCode(...text);
    },
  };
}
const DASH = 0x2d;
const HEX_DIGITS = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));

/** Paths whose values must never reach a log line. */
export const REDACTED_LOG_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'apiKey',
  'clientSecret',
  'password',
  '*.apiKey',
  '*.clientSecret',
  '*.password',
];

/**
 * The process's logger. By default it writes to stdout asynchronously, as pino advises for
 * throughput: lines logged while a write is in flight are gathered and written together, instead
 * of one blocking write(2) per line on the event loop (at the default level, one line per
 * request). pino writes what is still buffered synchronously when the process exits (its exit
 * hook for asynchronous destinations), which shutdown and fatal errors reach through
 * process.exit; only a kill -9 can lose the last lines (log lines, never messages).
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  return createLogging(config, destination).logger;
}

/**
 * The logger and the request lines written straight to its destination (directRequestLines):
 * stdout by default (log-destination.ts, request lines gathered per event loop turn), or the
 * given stream, every line as it comes.
 */
export function createLogging(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): { logger: Logger; requestLines: RequestLines } {
  const { stream: out, requestLine } = destination ? { stream: destination, requestLine: (line: string) => void destination.write(line) } : stdoutDestination();
  // pino's default base, stated so that the request lines carry the same.
  const base = { pid: process.pid, hostname: os.hostname() };
  const logger = pino({ level: config.logLevel, base, redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' }, serializers: requestLogSerializers }, out);
  return { logger, requestLines: directRequestLines(logger, base, requestLine) };
}

export interface BuildDepsOverrides {
  storage?: Storage;
  /** A logger of the caller's; its request lines go through it (pinoRequestLines). */
  logger?: Logger;
  /** A logger with its request lines (createLogging), e.g. into a test's stream. */
  logging?: { logger: Logger; requestLines: RequestLines };
  clock?: Clock;
  ids?: Ids;
  secrets?: Secrets;
  queue?: QueueOptions;
}

export function buildDeps(config: Config, overrides: BuildDepsOverrides = {}): Deps {
  const { logger, requestLines } = overrides.logging ?? (overrides.logger ? { logger: overrides.logger, requestLines: pinoRequestLines(overrides.logger) } : createLogging(config));
  const storage =
    overrides.storage ??
    openStorage({
      databaseUrl: config.databaseUrl,
      sqliteFile: path.join(config.dataDir, 'clarion.sqlite'),
      warn: (message, err) => logger.warn({ err }, message),
    });
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? uuidIds();
  const load = new ApiLoad();
  const deps: Omit<Deps, 'inappRealtime'> & { inappRealtime?: InappRealtime } = {
    config,
    storage,
    db: storage.db,
    logger,
    requestLines,
    clock,
    ids,
    secrets: overrides.secrets ?? new Secrets(loadRootKey(config.secretKey, config.dataDir)),
    load,
    ledger: new DeliveryLedger({ db: storage.db, dialect: storage.dialect, clock, ids, logger }),
    queue: createQueue(storage, {
      logger,
      ids,
      clock,
      databaseUrl: config.databaseUrl,
      lockMs: config.jobLockSeconds * 1000,
      // pg-boss expires dead workers' locks during maintenance; run it as often as a lock can expire.
      maintenanceIntervalSeconds: Math.min(30, config.jobLockSeconds),
      busy: () => load.busy(),
      busyShare: config.busyWorkerPercent / 100,
      ...overrides.queue,
    }),
  };
  // Built last: it reads the other dependencies.
  deps.inappRealtime = new InappRealtime(deps);
  return deps as Deps;
}
