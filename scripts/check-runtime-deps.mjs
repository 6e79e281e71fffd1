#!/usr/bin/env node
// npm run lint (through .ci/run): every package the server imports at run time (src/, not
// `import type`) is in package.json's `dependencies`, so that an install without dev
// dependencies (the container image's `npm prune --omit=dev`) runs. Node's builtins excepted.
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const runtime = new Set(Object.keys(pkg.dependencies ?? {}));
const builtins = new Set(builtinModules);
const files = fs.readdirSync('src', { recursive: true }).filter((f) => f.endsWith('.ts')).map((f) => path.join('src', f));
// Static imports and re-exports (not `import type` / `export type`), dynamic import('x') and require('x') (packages loaded on first use).
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?!type\s)(?:[^'"]*?\sfrom\s+)?['"]([^'"]+)['"]|\b(?:import|require)\(\s*['"]([^'"]+)['"]\s*\)/g;
/** Imported only when running from source (.ts files, tsx), where dev dependencies are installed. */
const SOURCE_ONLY = new Set(['tsx']);
const packageOf = (spec) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
const missing = [];
for (const file of files) {
  for (const m of fs.readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const spec = m[1] ?? m[2];
    if (spec.startsWith('.') || spec.startsWith('node:') || builtins.has(spec)) continue;
    if (!runtime.has(packageOf(spec)) && !SOURCE_ONLY.has(packageOf(spec))) missing.push(`${file}: imports "${spec}", which is not in dependencies`);
  }
}
for (const line of missing) console.error(line);
if (missing.length) process.exit(1);
console.log(`runtime imports: ${files.length} files import only dependencies and node builtins`);
