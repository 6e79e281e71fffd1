import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { CoreTables } from '../../storage/schema.js';
import { SmsOptOutsRepository } from './sms-opt-outs.repository.js';

/** Twilio's default keywords (opt-out list as of 2025-05-14, with REVOKE and OPTOUT). */
export const STOP_KEYWORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'REVOKE', 'OPTOUT']);
export const START_KEYWORDS = new Set(['START', 'YES', 'UNSTOP']);
export const HELP_KEYWORDS = new Set(['HELP', 'INFO']);

export type InboundKeyword = 'stop' | 'start' | 'help';

const OPT_OUT_TYPES: Record<string, InboundKeyword> = { STOP: 'stop', START: 'start', HELP: 'help' };

/** A text's body as matched against the keywords: trimmed, upper case, without trailing `.`/`!`. */
export function keywordOf(body: string): string {
  return body.trim().replace(/[.!]+$/, '').toUpperCase();
}

/**
 * What an inbound text asks of the carrier's keyword handling. Twilio's OptOutType (set when its
 * Advanced Opt-Out recognised a keyword, custom and other-language ones included) decides when
 * present; otherwise the body must be one of the default keywords.
 */
export function inboundKeyword(body: string, optOutType: string | undefined): InboundKeyword | null {
  const typed = optOutType ? OPT_OUT_TYPES[optOutType.trim().toUpperCase()] : undefined;
  if (typed) return typed;
  const keyword = keywordOf(body);
  return STOP_KEYWORDS.has(keyword) ? 'stop' : START_KEYWORDS.has(keyword) ? 'start' : HELP_KEYWORDS.has(keyword) ? 'help' : null;
}

/**
 * SMS opt-outs held on the number within an environment: the person who texted STOP, not the
 * user records that had the number then. Routing skips SMS to such a number whoever carries it.
 */
export class SmsOptOuts {
  constructor(private readonly deps: Pick<Deps, 'db'>) {}

  /** Records a STOP from `number` (in the caller's transaction `db`). */
  async stop(
    scope: { accountId: string; envId: string },
    number: string,
    stop: { keyword: string; to: string; messageSid: string | null; at: string },
    db: Kysely<CoreTables> = this.deps.db,
  ): Promise<void> {
    await new SmsOptOutsRepository(db).insert({
      account_id: scope.accountId,
      env_id: scope.envId,
      phone_number: number,
      keyword: stop.keyword,
      to_number: stop.to,
      message_sid: stop.messageSid,
      created_at: stop.at,
    });
  }

  /** Lifts the opt-out of `number` (START). */
  async start(scope: { accountId: string; envId: string }, number: string, db: Kysely<CoreTables> = this.deps.db): Promise<void> {
    await new SmsOptOutsRepository(db).delete(scope.accountId, scope.envId, number);
  }

  /** Which of `numbers` opted out in the environment (one query). */
  async optedOut(accountId: string, envId: string, numbers: string[], db: Kysely<CoreTables> = this.deps.db): Promise<Set<string>> {
    return new Set(await new SmsOptOutsRepository(db).optedOut(accountId, envId, numbers));
  }
}
