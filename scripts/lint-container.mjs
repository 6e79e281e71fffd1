#!/usr/bin/env node
// npm run lint (through .ci/run): the Dockerfile and compose.yaml pass scripts/lib/container-lint.mjs.
import fs from 'node:fs';
import { lintCompose, lintDockerfile } from './lib/container-lint.mjs';

const findings = [
  ...lintDockerfile(fs.readFileSync('Dockerfile', 'utf8')).map((f) => `Dockerfile: ${f}`),
  ...lintCompose(fs.readFileSync('compose.yaml', 'utf8')).map((f) => `compose.yaml: ${f}`),
];
for (const f of findings) console.error(f);
if (findings.length) process.exit(1);
console.log('container files: Dockerfile and compose.yaml pass');
