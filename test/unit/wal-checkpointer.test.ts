import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStorage } from '../../src/storage/db.js';
import { startWalCheckpointer } from '../../src/storage/wal-checkpointer.js';
import { eventually } from '../helpers/wait.js';

const dirs: string[] = [];
const tempFile = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-wal-'));
  dirs.push(dir);
  return path.join(dir, 'db.sqlite');
};
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('WAL checkpoints off the event loop', () => {
  it('the committing connection never checkpoints; the thread copies the log into the file', async () => {
    const file = tempFile();
    const storage = openStorage({ sqliteFile: file });
    try {
      const sqlite = storage.sqlite!;
      expect(sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
      sqlite.exec('create table t (id integer primary key, v text)');
      const insert = sqlite.prepare('insert into t (v) values (?)');
      const fileBefore = fs.statSync(file).size;
      // About 2 MB of rows, in commits of 100 rows: past SQLite's own 1,000-page threshold.
      for (let commit = 0; commit < 50; commit++) {
        sqlite.transaction(() => {
          for (let i = 0; i < 100; i++) insert.run('x'.repeat(400));
        })();
      }
      // With automatic checkpoints off here, only the thread can have grown the database file.
      await eventually(() => fs.statSync(file).size > fileBefore + 1_000_000, 10_000, 'the checkpoint thread to copy the log');
      // Once a checkpoint has caught up, the writer starts the log over instead of growing it:
      // ten more rounds of about 400 KB (4 MB in all) leave the log file about as large as it was.
      const walBefore = fs.statSync(`${file}-wal`).size;
      for (let round = 0; round < 10; round++) {
        const fileSize = fs.statSync(file).size;
        sqlite.transaction(() => {
          for (let i = 0; i < 1000; i++) insert.run('y'.repeat(400));
        })();
        await eventually(() => fs.statSync(file).size > fileSize + 300_000, 10_000, 'the round to be checkpointed');
      }
      expect(fs.statSync(`${file}-wal`).size).toBeLessThan(walBefore + 1_000_000);
      expect((sqlite.prepare('select count(*) as n from t').get() as { n: number }).n).toBe(15_000);
    } finally {
      await storage.close();
    }
    // Everything committed is in the file after close, whoever checkpointed it.
    const reopened = openStorage({ sqliteFile: file });
    try {
      expect((reopened.sqlite!.prepare('select count(*) as n from t').get() as { n: number }).n).toBe(15_000);
    } finally {
      await reopened.close();
    }
  });

  it('tells the caller when the thread cannot run, so checkpoints can move back', async () => {
    const missing = path.join(path.dirname(tempFile()), 'absent.sqlite');
    const failures: Error[] = [];
    let exited!: () => void;
    const exit = new Promise<void>((resolve) => (exited = resolve));
    const checkpointer = startWalCheckpointer(missing, (error) => {
      failures.push(error);
      if (/exited/.test(error.message)) exited();
    });
    await exit;
    expect(failures[0]).toBeInstanceOf(Error);
    expect(failures[0].message).toMatch(/SQLITE_CANTOPEN/);
    // Closing the storage stops it: that ends although the thread is gone (it used to wait forever).
    await checkpointer.stop();
  });
});
