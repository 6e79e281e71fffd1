#!/usr/bin/env node
// Runs the suite with vitest and ends with the plain summary line CI reads: "N passed, N failed".
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

const out = '.test-results/vitest.json';
fs.mkdirSync('.test-results', { recursive: true });
fs.rmSync(out, { force: true });
const result = spawnSync(
  process.execPath,
  ['node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile=${out}`, ...process.argv.slice(2)],
  { stdio: 'inherit' },
);
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const report = JSON.parse(fs.readFileSync(out, 'utf8'));
  passed = report.numPassedTests;
  failed = report.numFailedTests;
  skipped = report.numPendingTests + report.numTodoTests;
  // A file whose setup or load fails has no failed test in the counts; count the file as a failure.
  failed += report.testResults.filter((f) => f.status === 'failed' && !f.assertionResults.some((a) => a.status === 'failed')).length;
} catch {
  failed = Math.max(failed, 1);
}
if (result.status !== 0 && failed === 0) failed = 1;
const code = failed === 0 ? 0 : 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(code);
