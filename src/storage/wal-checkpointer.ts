import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the checkpoint thread copies the write-ahead log into the database file. */
const CHECKPOINT_INTERVAL_MS = 100;

/**
 * The checkpoint thread: its own connection to the file, a PASSIVE checkpoint every interval.
 * PASSIVE never waits for or blocks the writer; it copies what it can and fsyncs the database
 * file, and the writer restarts the log from its start once a checkpoint has caught up. Plain
 * JavaScript run with `eval`, so the thread starts in milliseconds without a TypeScript loader.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 0');
const checkpoint = () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (err) {
    // SQLITE_BUSY: another connection is checkpointing; the next turn catches up.
    if (err.code !== 'SQLITE_BUSY') throw err;
  }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on('message', (msg) => {
  if (msg !== 'stop') return;
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.postMessage('stopped');
});
`;

export interface WalCheckpointer {
  /** Runs a last checkpoint, closes the thread's connection and ends the thread. */
  stop(): Promise<void>;
}

/**
 * Moves SQLite's WAL checkpoints off the event loop. By default the connection that commits
 * checkpoints itself whenever the log passes 1,000 pages: a commit then copies pages into the
 * database file and fsyncs it, on the thread that answers requests. Measured (issue 11, POST
 * /send, 50 connections, embedded default): with checkpoints off that thread, 1.5 times the
 * accepted rate. The caller turns automatic checkpoints off on its own connection
 * (`wal_autocheckpoint = 0`) once this has started; `onFailure` is told if the thread dies, so the
 * caller can turn them back on (an unchecked log would grow without bound).
 */
export function startWalCheckpointer(file: string, onFailure: (error: Error) => void, intervalMs = CHECKPOINT_INTERVAL_MS): WalCheckpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { file, driver, intervalMs } });
  // The thread never keeps the process alive; stop() ends it on close.
  worker.unref();
  let stopping = false;
  let exited = false;
  worker.on('error', (error: unknown) => {
    if (!stopping) onFailure(threadError(error));
  });
  worker.on('exit', (code) => {
    exited = true;
    if (!stopping) onFailure(new Error(`the WAL checkpoint thread exited (${code})`));
  });
  return {
    async stop() {
      if (stopping) return;
      stopping = true;
      // A thread that already died answers nothing and exits no more: waiting for it would never end.
      if (exited) return;
      const stopped = new Promise<void>((resolve) => {
        worker.once('message', () => resolve());
        worker.once('exit', () => resolve());
      });
      worker.postMessage('stop');
      await stopped;
      await worker.terminate();
    },
  };
}

/**
 * What the thread threw, as an Error: better-sqlite3's SqliteError crosses the thread boundary as
 * a plain object holding only its `code`.
 */
function threadError(error: unknown): Error {
  if (error instanceof Error) return error;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : String(error);
  return new Error(`the WAL checkpoint thread failed: ${code}`);
}
