// The code before a change, for "after vs before" in the same run: a temporary git worktree of
// a given ref, sharing this checkout's node_modules (so both sides run the same libraries
// unless the ref changed package.json; then install there by hand and pass BENCH_BEFORE_DIR).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './lib.js';

export interface Checkout {
  root: string;
  /** The ref as given and the commit it names. */
  ref: string;
  commit: string;
  remove(): void;
}

export function checkoutBefore(ref: string): Checkout {
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--verify', `${ref}^{commit}`], { encoding: 'utf8' }).trim();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-before-'));
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', root, commit], { stdio: 'ignore' });
  fs.symlinkSync(fs.realpathSync(path.join(ROOT, 'node_modules')), path.join(root, 'node_modules'));
  // Run built, as the code after the change is (serveClarion).
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
  return {
    root,
    ref,
    commit,
    remove() {
      execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', root], { stdio: 'ignore' });
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
