import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SecretKeyProblem, loadRootKey, parseKey } from '../../src/secrets.js';
import { runCli } from '../helpers/process.js';

const dataDirs: string[] = [];
afterAll(() => dataDirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));
const freshDataDir = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-key-'));
  dataDirs.push(dir);
  return dir;
};

describe('the server secret key', () => {
  const hex = 'ab'.repeat(32);

  it('reads 64+ hex digits or base64 of 32+ bytes, and refuses anything shorter or cut', () => {
    expect(parseKey(`${hex}\n`)).toHaveLength(32);
    expect(parseKey(Buffer.alloc(32, 7).toString('base64'))).toHaveLength(32);
    expect(parseKey(Buffer.alloc(40, 7).toString('base64url'))).toHaveLength(40);
    expect(() => parseKey(hex.slice(0, 63))).toThrow(/odd number/);
    expect(() => parseKey(Buffer.alloc(31, 7).toString('base64'))).toThrow(/31 bytes/);
    expect(() => parseKey('')).toThrow(/empty/);
    expect(() => parseKey('not a key at all!')).toThrow(/neither hex nor base64/);
  });

  it('names the key file that cannot be used', () => {
    const dir = freshDataDir();
    fs.writeFileSync(path.join(dir, 'secret.key'), '');
    expect(() => loadRootKey(undefined, dir)).toThrow(SecretKeyProblem);
    expect(() => loadRootKey(undefined, dir)).toThrow(`${path.join(dir, 'secret.key')} is not a usable key (it is empty)`);
  });

  it('a start whose key does not open the stored secrets stops with one line, for a lost, a cut and a replaced key', async () => {
    const dir = freshDataDir();
    const env = { CLARION_DATA_DIR: dir, DATABASE_URL: '', CLARION_SECRET_KEY: '' };
    const first = await runCli(['init', '--json'], env);
    expect(first.code, first.stderr).toBe(0);
    const keyFile = path.join(dir, 'secret.key');
    const original = fs.readFileSync(keyFile, 'utf8');
    const cases: [string, () => void, RegExp][] = [
      ['lost', () => fs.rmSync(keyFile), /does not open the secrets stored in this database/],
      ['cut', () => fs.writeFileSync(keyFile, original.trim().slice(0, 63)), /secret\.key is not a usable key \(63 hex digits, an odd number\)/],
      ['replaced', () => fs.writeFileSync(keyFile, `${hex}\n`), /does not open the secrets stored in this database/],
    ];
    for (const [name, damage, message] of cases) {
      damage();
      const refused = await runCli(['init', '--json'], env);
      expect(refused.code, name).toBe(1);
      expect(refused.stderr.trim().split('\n'), name).toHaveLength(1);
      expect(refused.stderr, name).toMatch(message);
      expect(refused.stdout, name).toBe('');
      fs.writeFileSync(keyFile, original);
    }
    // With its own key back, the database opens again: the account made then can act.
    const again = await runCli(['init', '--json'], env);
    expect(again.code, again.stderr).toBe(0);
  }, 60_000);
});
