// The container files pass their lint (scripts/lint-container.mjs runs it in CI), and the lint
// catches what it exists to catch: a broken instruction, a root runtime, a missing health check,
// unpinned bases, apt without cleanup, a compose file that shares a database without one key.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lintCompose, lintDockerfile } from '../../scripts/lib/container-lint.mjs';

const dockerfile = fs.readFileSync('Dockerfile', 'utf8');
const compose = fs.readFileSync('compose.yaml', 'utf8');

describe('container files', () => {
  it("the project's Dockerfile and compose.yaml pass", () => {
    expect(lintDockerfile(dockerfile)).toEqual([]);
    expect(lintCompose(compose)).toEqual([]);
  });

  it('finds a runtime stage running as root, without a health check, and an unknown instruction', () => {
    const asRoot = dockerfile.replace(/^USER node$/m, 'USER root').replace(/^HEALTHCHECK[^\n]*\\\n[^\n]*\n/m, '').replace(/^EXPOSE/m, 'EXPOZE');
    const findings = lintDockerfile(asRoot);
    expect(findings).toEqual(expect.arrayContaining(['the runtime stage must run as a non-root USER', 'the runtime stage needs one HEALTHCHECK']));
    expect(findings.some((f) => /EXPOZE|instruction/i.test(f))).toBe(true);
  });

  it('finds unpinned base images, apt without --no-install-recommends or cleanup, npm install and ADD', () => {
    const sloppy = ['FROM node', 'RUN apt-get install -y g++', 'RUN npm install', 'ADD . /app', 'FROM node:latest', 'USER node', 'HEALTHCHECK CMD node -e "fetch(\'http://127.0.0.1:3000/status\')"', 'CMD ["node", "dist/main.js"]'].join('\n');
    const findings = lintDockerfile(sloppy);
    expect(findings).toEqual(
      expect.arrayContaining([
        "FROM node: pin the base image's version",
        "FROM node:latest: pin the base image's version",
        expect.stringMatching(/apt-get install without --no-install-recommends/),
        expect.stringMatching(/remove \/var\/lib\/apt\/lists in the same RUN/),
        expect.stringMatching(/npm ci, not npm install/),
        'use COPY, not ADD',
      ]),
    );
    expect(findings).not.toContain('the runtime stage must run as a non-root USER');
  });

  it('finds a compose file without a worker, with a key written in it, or waiting on a service that has no health check', () => {
    expect(lintCompose(compose.replace(/^ {2}worker:/m, '  other:'))).toContain('service "worker" is missing');
    expect(lintCompose(compose.replace(/CLARION_SECRET_KEY: \$\{CLARION_SECRET_KEY[^\n]*/, 'CLARION_SECRET_KEY: 00112233'))).toContain(
      'service "api" has a CLARION_SECRET_KEY written in the file: take it from the environment',
    );
    const noPgCheck = compose.replace(/ {4}healthcheck:\n {6}test: \["CMD-SHELL"[^\n]*\n(?: {6}[^\n]*\n)*/, '');
    expect(noPgCheck).not.toBe(compose);
    expect(lintCompose(noPgCheck)).toContain('service "api" waits for "postgres" to be healthy, but "postgres" has no health check');
    expect(lintCompose('services: [unclosed')[0]).toMatch(/^not YAML/);
  });
});
