#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { buildDeps } from './deps.js';
import { bootstrapIfEmpty, createAccountWithEnvironment } from './modules/accounts/bootstrap.js';
import { AccountsRepository } from './modules/accounts/accounts.repository.js';
import { signAccountToken } from './modules/auth/jwt.js';
import { buildServices } from './services.js';
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

Configuration is read from environment variables; see README.md.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command ? 0 : 1;
  }
  const config = loadConfig();
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
      const deps = buildDeps(config);
      await deps.storage.migrate();
      const created = await createAccountWithEnvironment(deps, { name: values.name ?? 'Account' });
      await deps.storage.close();
      if (values.json) console.log(JSON.stringify(created));
      else printCredentials(created, baseUrl(config));
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
      const deps = buildDeps(config);
      await deps.storage.migrate();
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

function printCredentials(created: { accountId: string; clientId: string; clientSecret: string; apiKey: string }, url: string): void {
  console.log(
    [
      '',
      '  Clarion account created. Keep these; the API key is not shown again.',
      `    base URL      ${url}`,
      `    API key       ${created.apiKey}`,
      `    accountId     ${created.accountId}`,
      `    clientId      ${created.clientId}`,
      `    clientSecret  ${created.clientSecret}`,
      '',
      `  Try: curl -H "Authorization: Bearer ${created.apiKey}" ${url}/account`,
      '',
    ].join('\n'),
  );
}

async function serve(role: 'all' | 'api' | 'worker', config: ReturnType<typeof loadConfig>): Promise<number> {
  const deps = buildDeps(config);
  await deps.storage.migrate();
  const created = await bootstrapIfEmpty(deps);
  // One services object for the whole process: the API and its workers (role all) share it.
  const services = buildServices(deps);
  const app = role === 'worker' ? null : await buildApp(deps, services);
  const workers = role === 'api' ? null : await startWorkers(deps, services);
  if (app) {
    await app.listen({ port: config.port, host: config.host });
    if (created) printCredentials(created, baseUrl(config));
    else deps.logger.info(`Clarion listening on ${baseUrl(config)} (run \`clarion init\` for a new account and key)`);
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.logger.info({ signal }, 'shutting down');
    // Stop taking requests first, then let workers finish or release their jobs, then close storage.
    await app?.close();
    await workers?.stop();
    await deps.storage.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  return -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err) => {
    console.error(err instanceof ConfigError ? `clarion: ${err.message}` : err);
    process.exit(err instanceof ConfigError ? 2 : 1);
  },
);
