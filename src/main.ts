#!/usr/bin/env -S node --max-semi-space-size=8
import { parseArgs } from 'node:util';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { buildDeps } from './deps.js';
import { limitHeapGrowth, scheduleStartupCollection, scopeSemiSpaceFlagToMainThread } from './heap-settings.js';
import { bootstrapIfEmpty, createAccountWithEnvironment } from './modules/accounts/bootstrap.js';
import { AccountsRepository } from './modules/accounts/accounts.repository.js';
import { signAccountToken } from './modules/auth/jwt.js';
import { EnvironmentsRepository } from './modules/environments/environments.repository.js';
import { SecretKeyProblem, assertOpensSealed } from './secrets.js';
import { buildServices } from './services.js';
import { type DeliveryTargets, deliveryTargets } from './start-banner.js';
import { startWorkers } from './workers.js';

const USAGE = `clarion <command> [options]

Commands:
  serve              start the HTTP API (and, with CLARION_ROLE=all, the workers); migrates first
  worker             start only the delivery workers
  migrate            apply database migrations and exit
  init [--json] [--name NAME]
                     create an account with one environment and an API key
  token --account ID [--ttl SECONDS] [--subject NAME]
                     print a signed JWT acting on an account (default ttl 3600)

Each command takes --help. Configuration is read from environment variables; see README.md.`;

/** What `clarion <command> --help` prints: the command's own usage, nothing run. */
const COMMAND_HELP: Record<string, string> = {
  serve: `clarion serve

Migrates the database, then starts the HTTP API on HOST:PORT and, with CLARION_ROLE=all (the
default), the delivery workers and the inbound SMTP server in the same process
(CLARION_ROLE=api: the API only). On an empty database it creates a bootstrap account and
prints its API key. Stops cleanly on SIGINT or SIGTERM.`,
  worker: `clarion worker

Migrates the database, then starts only the delivery workers and the inbound SMTP server
(CLARION_INBOUND_SMTP_PORT): no HTTP port. Run it beside \`CLARION_ROLE=api clarion serve\`
processes sharing one DATABASE_URL and one CLARION_SECRET_KEY.`,
  migrate: `clarion migrate

Applies the database migrations that are not applied yet, prints them and exits. Safe to run
while other processes use the database.`,
  init: `clarion init [--json] [--name NAME]

Creates an account (named NAME, default "Account") with one environment and an API key, and
prints them (--json: as one JSON object). Migrates first. The environment is in in-app secure
mode: in-app clients must send the user hash (README: In-app); PATCH the environment with
{"secureMode": false} to turn it off for a quick demo.`,
  token: `clarion token --account ID [--ttl SECONDS] [--subject NAME]

Prints a JWT signed with the server's key, acting on account ID for SECONDS (default 3600);
NAME is its subject (default "cli").`,
};

const wantsHelp = (args: string[]) => args.includes('--help') || args.includes('-h');

/** Why the database cannot be used, in one line, or undefined for errors of another kind. */
function databaseProblem(err: unknown, config: ReturnType<typeof loadConfig>): string | undefined {
  const e = err as { code?: string; message?: string; errno?: number } | null;
  const code = e?.code ?? '';
  const network = ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET'].includes(code);
  // PostgreSQL's own refusals: class 28 (authentication), 3D000 (no such database), 57P03 (starting up).
  const postgres = /^(28|3D000|57P03)/.test(code);
  const sqlite = code.startsWith('SQLITE_CANTOPEN') || code === 'EACCES' || code === 'EROFS';
  if (!network && !postgres && !sqlite) return undefined;
  const where = config.databaseUrl ? redactUrl(config.databaseUrl) : `the SQLite file in ${config.dataDir}`;
  const fix = config.databaseUrl ? 'check DATABASE_URL and that PostgreSQL is running' : 'check CLARION_DATA_DIR';
  return `cannot use the database at ${where}: ${e?.message ?? code} (${code}); ${fix}`;
}

/** A port that cannot be listened on, in one line, or undefined. */
function listenProblem(err: unknown): string | undefined {
  const e = err as { code?: string; message?: string; fix?: string } | null;
  if (e?.code !== 'EADDRINUSE' && e?.code !== 'EACCES' && e?.code !== 'EADDRNOTAVAIL') return undefined;
  // A listener that knows which setting names its port says so (the inbound SMTP server).
  return `cannot listen: ${e.message}; ${e.fix ?? 'set PORT (HTTP) or CLARION_INBOUND_SMTP_PORT (inbound SMTP) to a free port, or HOST to an address of this machine'}`;
}

/** A connection URL without its password. */
function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.href;
  } catch {
    return 'DATABASE_URL';
  }
}

async function main(argv: string[]): Promise<number> {
  // Before migrations and the app's schemas allocate: every later heap limit follows it.
  limitHeapGrowth();
  // Before any worker thread starts: each keeps the young generation its resourceLimits ask for.
  scopeSemiSpaceFlagToMainThread();
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command ? 0 : 1;
  }
  if (wantsHelp(rest)) {
    const help = COMMAND_HELP[command];
    if (help) console.log(help);
    else console.error(`unknown command "${command}"\n\n${USAGE}`);
    return help ? 0 : 1;
  }
  const config = loadConfig();
  try {
    return await run(command, rest, config);
  } catch (err) {
    const problem = databaseProblem(err, config) ?? listenProblem(err) ?? (err instanceof SecretKeyProblem ? err.message : undefined);
    if (problem) throw new DatabaseUnavailable(problem);
    throw err;
  }
}

/** The database cannot be reached or opened, a port cannot be listened on, or the secret key does not fit: printed as one line, exit 1. */
class DatabaseUnavailable extends Error {}

/** Dependencies on the migrated database, once the server key is known to open its sealed secrets. */
async function migratedDeps(config: ReturnType<typeof loadConfig>): Promise<ReturnType<typeof buildDeps>> {
  const deps = buildDeps(config);
  await deps.storage.migrate();
  await checkSecretKey(deps);
  return deps;
}

async function checkSecretKey(deps: ReturnType<typeof buildDeps>): Promise<void> {
  try {
    assertOpensSealed(deps.secrets, await new EnvironmentsRepository(deps.db).anySealedSecret());
  } catch (err) {
    await deps.storage.close();
    throw err;
  }
}

async function run(command: string, rest: string[], config: ReturnType<typeof loadConfig>): Promise<number> {
  switch (command) {
    case 'migrate': {
      const deps = buildDeps(config);
      const applied = await deps.storage.migrate();
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
      await deps.storage.close();
      return 0;
    }
    case 'init': {
      const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean' }, name: { type: 'string' } } });
      const deps = await migratedDeps(config);
      // Secure mode: an in-app feed is read only with the user hash the customer's server computes.
      const created = await createAccountWithEnvironment(deps, { name: values.name ?? 'Account', secureMode: true });
      await deps.storage.close();
      if (values.json) console.log(JSON.stringify(created));
      else {
        printCredentials(created, baseUrl(config));
        console.log(
          [
            '  In-app secure mode is on: in-app clients send userHash = base64(HMAC-SHA256(clientSecret, userId)),',
            '  computed on your server. For a quick demo without it:',
            `    curl -X PATCH -H "Authorization: Bearer ${created.apiKey}" -H 'content-type: application/json' \\`,
            `         -d '{"secureMode":false}' ${baseUrl(config)}/environments/${created.clientId}`,
            '',
          ].join('\n'),
        );
      }
      return 0;
    }
    case 'token': {
      const { values } = parseArgs({
        args: rest,
        options: { account: { type: 'string' }, ttl: { type: 'string' }, subject: { type: 'string' } },
      });
      if (!values.account) throw new ConfigError('token needs --account <accountId>');
      const ttl = values.ttl ? Number(values.ttl) : 3600;
      if (!Number.isInteger(ttl) || ttl <= 0) throw new ConfigError('--ttl must be a positive number of seconds');
      const deps = await migratedDeps(config);
      const account = await new AccountsRepository(deps.db).find(values.account);
      await deps.storage.close();
      if (!account) throw new ConfigError(`no account ${values.account}`);
      console.log(await signAccountToken(deps.secrets, { accountId: account.id, subject: values.subject ?? 'cli' }, ttl, deps.clock.now()));
      return 0;
    }
    case 'serve':
    case 'worker':
      return serve(command === 'worker' ? 'worker' : config.role, config);
    default:
      console.error(`unknown command "${command}"\n\n${USAGE}`);
      return 1;
  }
}

function baseUrl(config: ReturnType<typeof loadConfig>): string {
  return config.publicUrl ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
}

function printCredentials(created: { accountId: string; clientId: string; clientSecret: string; apiKey: string }, url: string, targets?: DeliveryTargets): void {
  console.log(
    [
      '',
      '  Clarion account created. Keep these; the API key is not shown again.',
      `    base URL      ${url}`,
      `    API key       ${created.apiKey}`,
      `    accountId     ${created.accountId}`,
      `    clientId      ${created.clientId}`,
      `    clientSecret  ${created.clientSecret}`,
      ...(targets ? ['', '  Where messages go:', `    mail          ${targets.mail}`, `    texts, calls  ${targets.texts}`] : []),
      '',
      `  Try: curl -H "Authorization: Bearer ${created.apiKey}" ${url}/account`,
      '',
    ].join('\n'),
  );
}

async function serve(role: 'all' | 'api' | 'worker', config: ReturnType<typeof loadConfig>): Promise<number> {
  const deps = buildDeps(config);
  let app: Awaited<ReturnType<typeof buildApp>> | null = null;
  let workers: Awaited<ReturnType<typeof startWorkers>> | null = null;
  /** A first start's banner not printed yet: printed by whatever ends the start (a signal, an error). */
  let bannerDue: (() => void) | null = null;
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    // Stopped while starting (Ctrl-C, docker stop): the account exists, its key must not be lost.
    bannerDue?.();
    deps.logger.info({ signal }, 'shutting down');
    // Stop taking requests first, then let workers finish or release their jobs, then close storage.
    await app?.close();
    await workers?.stop();
    await deps.storage.close();
    process.exit(0);
  };
  // From the start, not once listening: the first start commits the bootstrap account seconds
  // before the API answers.
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  /** A start stopped part-way goes no further (no second banner, no listening): stop() exits the process. */
  const unlessStopping = async () => {
    if (stopping) await new Promise<never>(() => {});
  };
  await deps.storage.migrate();
  await checkSecretKey(deps);
  const created = await bootstrapIfEmpty(deps);
  await unlessStopping();
  if (created) {
    bannerDue = () => {
      bannerDue = null;
      printCredentials(created, baseUrl(config));
    };
  }
  try {
    // One services object for the whole process: the API and its workers (role all) share it.
    const services = buildServices(deps);
    app = role === 'worker' ? null : await buildApp(deps, services);
    await unlessStopping();
    // Listening before the workers start: a job due at start that calls this server (the
    // development carrier's status callbacks) finds it answering.
    if (app) await app.listen({ port: config.port, host: config.host });
    await unlessStopping();
    workers = role === 'api' ? null : await startWorkers(deps, services);
    await unlessStopping();
  } catch (err) {
    // Storage closed under the start by stop(): not a failure of the start.
    await unlessStopping();
    // The account exists from now on: its key must not be lost with a start that failed after it.
    bannerDue?.();
    throw err;
  }
  // Started: what loading the modules and compiling the schemas left behind goes once things settle.
  scheduleStartupCollection();
  // Printed once the API answers (role worker: once the workers run), with where messages go.
  const targets = app ? deliveryTargets(config, baseUrl(config)) : undefined;
  if (created) {
    bannerDue = null;
    printCredentials(created, baseUrl(config), targets);
  } else if (targets) deps.logger.info({ ...targets }, `Clarion listening on ${baseUrl(config)} (run \`clarion init\`, from a checkout \`node dist/main.js init\`, for a new account and key); mail: ${targets.mail}; texts and calls: ${targets.texts}`);
  return -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    if (err instanceof ConfigError) {
      for (const line of err.message.split('\n')) console.error(`clarion: ${line}`);
      process.exit(2);
    }
    if (err instanceof DatabaseUnavailable) {
      console.error(`clarion: ${err.message}`);
      process.exit(1);
    }
    console.error(err);
    process.exit(1);
  },
);
