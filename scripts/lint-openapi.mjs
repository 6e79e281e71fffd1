#!/usr/bin/env node
// npm run lint (through .ci/run): the OpenAPI document the server serves at /openapi.json (and
// renders at /docs) passes `redocly lint` with redocly.yaml. The document is built from the source
// (run with `node --import tsx`) by the same buildApp the server runs, on an in-memory SQLite and
// a throw-away data directory, without listening; the default configuration decides which optional
// routes it lists (the development carrier's, with no Twilio credentials). It is written to
// .test-results/openapi.json, the path .redocly.lint-ignore.yaml names, and left there to read.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { buildDeps } from '../src/deps.ts';
import { Secrets } from '../src/secrets.ts';
import { buildServices } from '../src/services.ts';
import { openStorage } from '../src/storage/db.ts';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-openapi-'));
try {
  // Only what the document depends on: none of the caller's environment (DATABASE_URL, Twilio).
  const config = loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: 'silent', CLARION_INBOUND_SMTP_PORT: 'off' });
  const storage = openStorage({ sqliteFile: ':memory:' });
  const deps = buildDeps(config, { storage, logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)) });
  const app = await buildApp(deps, buildServices(deps));
  await app.ready();
  const file = path.join('.test-results', 'openapi.json');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(app.swagger(), null, 2));
  await app.close();
  await storage.close();

  const redocly = path.join('node_modules', '@redocly', 'cli', 'bin', 'cli.js');
  const args = [redocly, 'lint', file, '--config', 'redocly.yaml', '--format', process.env.REDOCLY_FORMAT ?? 'codeframe', '--max-problems', '1000'];
  const lint = spawnSync(process.execPath, args, { stdio: 'inherit', env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } });
  process.exitCode = lint.status ?? 1;
} finally {
  fs.rmSync(dataDir, { recursive: true, force: true });
}
