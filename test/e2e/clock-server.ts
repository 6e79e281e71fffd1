// The server as `clarion serve` runs it (role all: API and workers over one services object),
// but on a clock that starts at CLARION_TEST_NOW and runs at real speed from there: a test can
// start a real process "at" a digest's due time. Prints the bootstrap API key and "listening on"
// like the CLI. Test only: the CLI has no such switch.
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { buildDeps } from '../../src/deps.js';
import { bootstrapIfEmpty } from '../../src/modules/accounts/bootstrap.js';
import { buildServices } from '../../src/services.js';
import { startWorkers } from '../../src/workers.js';

const start = Date.now();
const base = Date.parse(process.env.CLARION_TEST_NOW ?? '');
if (Number.isNaN(base)) throw new Error('CLARION_TEST_NOW must be an ISO date-time');
const clock = { now: () => new Date(base + (Date.now() - start)) };

const config = loadConfig(process.env);
const deps = buildDeps(config, { clock });
await deps.storage.migrate();
const created = await bootstrapIfEmpty(deps);
const services = buildServices(deps);
const app = await buildApp(deps, services);
await startWorkers(deps, services);
await app.listen({ port: config.port, host: '127.0.0.1' });
if (created) console.log(`API key ${created.apiKey}`);
console.log(`listening on ${config.port}`);
