// What every scenario shares: load shape and the send body (env vars, so CI-like runs can be short).
export const BENCH = {
  connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
  rounds: Number(process.env.BENCH_ROUNDS ?? 8),
  /** Length of one measured round: BENCH_SECONDS (total per side) spread over the rounds. */
  get roundSeconds() {
    return Math.max(1, Math.round(Number(process.env.BENCH_SECONDS ?? 16) / this.rounds));
  },
  emails: Number(process.env.BENCH_EMAILS ?? 2000),
  /**
   * Mails each email sender (raw or Clarion's worker) delivers before the measured ones: a
   * long-running worker has its code compiled by the JIT; a fresh process spends its first few
   * thousand mails compiling it on V8's background threads (Clarion's worker, 2,000 mails cold:
   * about 550 µs per mail on those threads, against about 230 at 10,000).
   */
  emailWarm: Number(process.env.BENCH_EMAIL_WARM ?? 2000),
  /** Rounds of the email scenario (every raw sender, then Clarion, per round). */
  emailRounds: Number(process.env.BENCH_EMAIL_ROUNDS ?? 3),
  /** Users and delivered messages bulk-loaded for the "cost as the work grows" scenario. */
  seedSize: Number(process.env.BENCH_SEED ?? 1_000_000),
  /** Which scenarios run: comma-separated names, or all. */
  only: process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : null,
  /** Admin connection to PostgreSQL: the bench creates (and drops) its own database there. */
  postgresUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  /** A git ref to measure against ("after vs before"), e.g. HEAD~1. */
  beforeRef: process.env.BENCH_BEFORE_REF,
};

export const wants = (scenario: string) => BENCH.only === null || BENCH.only.has(scenario);
/** Scenarios too slow for every run (send-instructions: minutes under valgrind): only when BENCH_ONLY names them. */
export const optedIn = (scenario: string) => BENCH.only?.has(scenario) === true;

export const SEND_BODY = {
  type: 'bench_welcome',
  to: { id: 'bench-user', email: 'bench@example.com' },
  parameters: { name: 'Ada' },
  inapp: { title: 'Welcome {{ name }}', url: 'https://example.com/welcome' },
};
