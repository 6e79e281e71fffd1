import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * Runs the built CLI (`node dist/main.js <args>`), as `npm start` does: about a second faster per
 * start than from source through tsx, and the suite starts servers and CLIs some fifty times.
 * The test run's global setup has built dist if a source file was newer (ensureBuilt); CI's
 * `npm ci` built it already through `prepare`.
 */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, [path.join(ROOT, 'dist/main.js'), ...args], {
    cwd: ROOT,
    // Off unless a test asks for it: parallel test processes would all want the default 2525.
    env: { ...process.env, LOG_LEVEL: 'warn', CLARION_INBOUND_SMTP_PORT: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs a TypeScript file from source (tsx) in a process of its own, e.g. a server a test builds differently. */
export function spawnScript(file: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', file, ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', CLARION_INBOUND_SMTP_PORT: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/**
 * Builds dist when it is missing or older than a source file. Called once by the global setup,
 * before any test file runs, so that parallel test processes never build (or read) it half-written.
 */
export function ensureBuilt(): void {
  const main = path.join(ROOT, 'dist/main.js');
  if (fs.existsSync(main) && fs.statSync(main).mtimeMs >= newestSourceChange()) return;
  console.log('[clarion tests] building dist (npm run build): the CLI and server tests start the built CLI');
  const build = spawnSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`npm run build failed: ${build.stdout}${build.stderr}`);
}

function newestSourceChange(): number {
  const src = path.join(ROOT, 'src');
  const files = fs.readdirSync(src, { recursive: true, encoding: 'utf8' }).map((f) => path.join(src, f));
  return Math.max(...[...files, path.join(ROOT, 'tsconfig.build.json')].map((f) => fs.statSync(f).mtimeMs));
}

export async function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, stdout, stderr };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** Resolves with the accumulated stdout once `pattern` appears in it. */
export function waitForOutput(child: ChildProcess, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; stdout: ${out}; stderr: ${err}`)), timeoutMs);
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.on('data', (d) => {
      out += d;
      if (pattern.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ${pattern}; stdout: ${out}; stderr: ${err}`));
    });
  });
}
