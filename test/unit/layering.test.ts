import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The layering rules `npm run lint` enforces (.dependency-cruiser.cjs), run by the real
 * dependency-cruiser against small source trees: a rule that stopped matching would let CI pass
 * a broken layer, so each rule is shown to fail on the import it forbids and to pass without it.
 */
const root = path.resolve(import.meta.dirname, '../..');
const config = path.join(root, '.dependency-cruiser.cjs');
const depcruise = path.join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const trees: string[] = [];

function tree(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-layers-'));
  trees.push(dir);
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }));
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

function lint(dir: string): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [depcruise, 'src', '--config', config], { cwd: dir, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

afterAll(() => {
  for (const dir of trees) fs.rmSync(dir, { recursive: true, force: true });
});

describe('layering rules (npm run lint)', () => {
  it('passes a tree where modules use channels and nothing loops', () => {
    const dir = tree({
      'src/channels/email/smtp.ts': 'export const send = (to: string) => to;\n',
      'src/modules/sending/sending.service.ts': "import { send } from '../../channels/email/smtp.js';\nexport const accept = () => send('a@b.c');\n",
    });
    const result = lint(dir);
    expect(result.output).not.toContain('error');
    expect(result.status).toBe(0);
  });

  it('fails an import from channels/ into modules/', () => {
    const dir = tree({
      'src/modules/users/users.service.ts': 'export const user = 1;\n',
      'src/channels/email/smtp.ts': "import { user } from '../../modules/users/users.service.js';\nexport const send = () => user;\n",
    });
    const result = lint(dir);
    expect(result.status).not.toBe(0);
    expect(result.output).toContain('channels-not-to-modules');
  });

  it('fails an import cycle', () => {
    const dir = tree({
      'src/modules/a/a.service.ts': "import { b } from '../b/b.service.js';\nexport const a = () => b();\n",
      'src/modules/b/b.service.ts': "import { a } from '../a/a.service.js';\nexport const b = () => a();\n",
    });
    const result = lint(dir);
    expect(result.status).not.toBe(0);
    expect(result.output).toContain('no-circular');
  });
});
