import { hash } from 'node:crypto';
import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { Deduplication, NotificationType, Throttling } from '../types/types.service.js';
import type { SkipReason } from './routing.js';
import { type DedupKeysTable, SendGatesRepository } from './send-gates.repository.js';
import { SEND_EXTENSION_PREFIX, type SendBody, parametersOf } from './sending.schemas.js';
import type { MessageRow } from './sending.tables.js';

/**
 * Deduplication and throttling of a notification type (issue 13, item 5), decided when a batch
 * of messages is routed, inside the routing transaction:
 *
 * - deduplication `{duration}` (seconds): a send with the same type, user and content as one
 *   that claimed the window less than `duration` seconds before is skipped, every channel
 *   `DEDUPLICATED`. Windows are measured on the sends' own times (scheduled_for, else
 *   received_at: the injected clock when the send was accepted), so a backlog does not move them.
 * - throttling `{max, period, unit, forever, scope}`: at most `max` sends per window of `period`
 *   `unit` (fixed windows, opened by the first send counted after the last one ended; `forever`:
 *   one window that never ends), per type, and per user when `scope` names `userId`; the rest are
 *   skipped, every channel `THROTTLED`.
 *
 * Only sends that route to at least one channel take part. Every counter changes by one atomic
 * statement (SendGatesRepository), and a batch takes its rows in one order (every dedup claim,
 * sorted, then every throttle counter, sorted), so batches on other workers and processes wait
 * for each other instead of deadlocking. What a message's processing did not commit is given
 * back by undo() in the same transaction.
 */

/** A message about to be routed to at least one channel, of a type with deduplication or throttling. */
export interface GateInput {
  trackingId: string;
  accountId: string;
  envId: string;
  notificationId: string;
  userId: string;
  /** The send's own time (ISO): scheduled_for, else received_at. */
  at: string;
  body: SendBody;
  deduplication?: Deduplication;
  throttling?: Throttling;
}

/** What a message holds once gated: given back by undo() when its processing does not commit. */
interface Held {
  dedup?: { envId: string; fingerprint: string };
  counted?: { envId: string; key: string; windowEndsAt: string };
}

export type GateVerdict = Extract<SkipReason, 'DEDUPLICATED' | 'THROTTLED'> | null;

/** The gate input of a message routed to at least one channel; undefined when its type neither deduplicates nor throttles. */
export function gateInputOf(message: MessageRow, body: SendBody, type: Pick<NotificationType, 'deduplication' | 'throttling'>): GateInput | undefined {
  if (!type.deduplication && !type.throttling) return undefined;
  return {
    trackingId: message.tracking_id,
    accountId: message.account_id,
    envId: message.env_id,
    notificationId: message.notification_id,
    userId: message.user_id,
    at: message.scheduled_for ?? message.received_at,
    body,
    deduplication: type.deduplication,
    throttling: type.throttling,
  };
}

/** A gated send uses no channel: every channel routing chose is skipped with the gate's reason, and no delivery is made. */
export function skipEvery(plan: { skipped: Record<string, string>; rows: { channel: string }[]; collected?: unknown[] }, reason: NonNullable<GateVerdict>): void {
  for (const row of plan.rows) plan.skipped[row.channel] = reason;
  plan.rows = [];
  // Nor collected into a digest.
  if (plan.collected) plan.collected = [];
}

/** Far enough to never end: the window of a `forever` throttle (ISO text compares in order). */
export const FOREVER_END = '9999-12-31T23:59:59.999Z';

const UNIT_MS: Record<string, number> = { seconds: 1000, minutes: 60_000, hours: 3_600_000, days: 86_400_000 };
const UNIT_MONTHS: Record<string, number> = { months: 1, years: 12 };

/** The end of a window of `period` `unit` opened at `at` (months and years on the UTC calendar, the day clamped to the month's last). */
export function windowEnd(at: Date, throttling: Pick<Throttling, 'period' | 'unit' | 'forever'>): string {
  if (throttling.forever) return FOREVER_END;
  const months = UNIT_MONTHS[throttling.unit];
  if (months === undefined) return new Date(at.getTime() + throttling.period * UNIT_MS[throttling.unit]).toISOString();
  const end = new Date(at);
  const day = end.getUTCDate();
  end.setUTCDate(1);
  end.setUTCMonth(end.getUTCMonth() + throttling.period * months);
  const lastDay = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth() + 1, 0)).getUTCDate();
  end.setUTCDate(Math.min(day, lastDay));
  return end.toISOString();
}

/** The counter a send of this type counts on: per user when the scope names userId; per window length, so a changed period starts afresh. */
export function throttleKey(notificationId: string, userId: string, throttling: Throttling): string {
  const window = throttling.forever ? 'forever' : `${throttling.period} ${throttling.unit}`;
  return JSON.stringify([notificationId, throttling.scope.includes('userId') ? userId : null, window]);
}

/** Keys whose values are not content: who it goes to (only the id counts), when, and the aliases folded in. */
const NOT_CONTENT = new Set(['to', 'user', 'type', 'notificationId', 'schedule', 'parameters', 'mergeTags', 'replace', 'subNotificationId', 'secondaryId']);

/**
 * sha256 of the send's type, user and content (the body but who and when), its keys in order.
 * The text hashed is fixed (dedup_keys holds these across releases): a change of it would let a
 * duplicate through once, across an upgrade inside a window.
 */
export function contentFingerprint(notificationId: string, userId: string, body: SendBody): string {
  const content: Record<string, unknown> = {};
  // x-... fields are not interpreted (sending.schemas.ts), so not content either.
  for (const key of Object.keys(body)) if (!NOT_CONTENT.has(key) && !key.startsWith(SEND_EXTENSION_PREFIX)) content[key] = body[key as keyof SendBody];
  content.parameters = parametersOf(body);
  content.subNotificationId = body.subNotificationId ?? body.secondaryId ?? null;
  // crypto.hash over createHash: one call instead of a Hash object per send (bench gates-instructions).
  return hash('sha256', canonicalJson([notificationId, userId, content]), 'hex');
}

/**
 * JSON with every object's keys sorted (UTF-16 order) and its undefined values left out: equal
 * content, equal text. Loops and one string rather than entries, filter, map and join: the
 * fingerprint runs on every send of a deduplicating type (bench gates-instructions).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${text}]`;
  }
  const object = value as Record<string, unknown>;
  let text = '{';
  let first = true;
  for (const key of Object.keys(object).sort()) {
    const field = object[key];
    if (field === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:${canonicalJson(field)}`;
    first = false;
  }
  return `${text}}`;
}

const byAtThenId = (a: GateInput, b: GateInput) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.trackingId < b.trackingId ? -1 : 1);
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The dedup_keys row a send claims: its fingerprint from its own time for the type's duration. */
function dedupClaim(input: GateInput, fingerprint: string): DedupKeysTable {
  const expiresAt = new Date(Date.parse(input.at) + input.deduplication!.duration * 1000).toISOString();
  return { env_id: input.envId, fingerprint, account_id: input.accountId, tracking_id: input.trackingId, claimed_at: input.at, expires_at: expiresAt };
}

function groupBy(inputs: GateInput[], keyOf: (input: GateInput) => string): [string, GateInput[]][] {
  const groups = new Map<string, GateInput[]>();
  for (const input of inputs) {
    const key = keyOf(input);
    const group = groups.get(key);
    if (group) group.push(input);
    else groups.set(key, [input]);
  }
  return [...groups].sort(([a], [b]) => compare(a, b)).map(([key, group]) => [key, group.sort(byAtThenId)]);
}

/** The gates of one routing transaction: decide() once, undo() for what did not commit. */
export class GateDecisions {
  readonly verdicts = new Map<string, GateVerdict>();
  private readonly held = new Map<string, Held>();

  private constructor(private readonly repo: SendGatesRepository) {}

  /** Decides deduplication, then throttling, for the batch's gated messages, in `trx` (`sqlite`: its connection, SQLite only). */
  static async decide(trx: Kysely<CoreTables>, inputs: GateInput[], sqlite?: SQLite.Database): Promise<GateDecisions> {
    const gates = new GateDecisions(new SendGatesRepository(trx, sqlite));
    if (inputs.length > 0) {
      await gates.deduplicate(inputs.filter((i) => i.deduplication));
      await gates.throttle(inputs.filter((i) => i.throttling && gates.verdicts.get(i.trackingId) !== 'DEDUPLICATED'));
    }
    return gates;
  }

  private holding(trackingId: string): Held {
    let held = this.held.get(trackingId);
    // Every Held of one shape (both fields present), whichever gates a send passed.
    if (!held) this.held.set(trackingId, (held = { dedup: undefined, counted: undefined }));
    return held;
  }

  /**
   * Claims in rounds, one statement per round on PostgreSQL (one row per fingerprint, in key
   * order): first every group's earliest send; then, for each group with a later send at or
   * after the end of the window its claim left, that send (its row is locked by this transaction
   * already); and so on. A later send inside the window is a duplicate without a statement.
   */
  private async deduplicate(inputs: GateInput[]): Promise<void> {
    const fingerprints = new Map(inputs.map((i) => [i.trackingId, contentFingerprint(i.notificationId, i.userId, i.body)]));
    // Per fingerprint: its sends in order of their times, the next one to decide, and the end of the window the last claim left.
    let open = groupBy(inputs, (i) => `${i.envId} ${fingerprints.get(i.trackingId)!}`).map(([, sends]) => ({ sends, next: 0, holdsUntil: '' }));
    while (open.length > 0) {
      for (const group of open) {
        while (group.next < group.sends.length && group.sends[group.next].at < group.holdsUntil) this.verdicts.set(group.sends[group.next++].trackingId, 'DEDUPLICATED');
      }
      open = open.filter((group) => group.next < group.sends.length);
      const claims = open.map((group) => {
        const input = group.sends[group.next++];
        return dedupClaim(input, fingerprints.get(input.trackingId)!);
      });
      const holders = await this.repo.claimDedups(claims);
      for (const [i, group] of open.entries()) {
        const { tracking_id: trackingId, env_id: envId, fingerprint } = claims[i];
        group.holdsUntil = holders[i].expires_at;
        if (holders[i].tracking_id !== trackingId) {
          this.verdicts.set(trackingId, 'DEDUPLICATED');
          continue;
        }
        this.verdicts.set(trackingId, null);
        this.holding(trackingId).dedup = { envId, fingerprint };
      }
    }
  }

  private async throttle(inputs: GateInput[]): Promise<void> {
    for (const [, group] of groupBy(inputs, (i) => `${i.envId} ${throttleKey(i.notificationId, i.userId, i.throttling!)}`)) {
      const first = group[0];
      const throttling = first.throttling!;
      const key = throttleKey(first.notificationId, first.userId, throttling);
      const counted = await this.repo.count({ env_id: first.envId, counter_key: key, account_id: first.accountId }, group.length, first.at, windowEnd(new Date(first.at), throttling));
      // The group's sends are the last `group.length` counted, in order of their times.
      const before = counted.count - group.length;
      for (const [i, input] of group.entries()) {
        this.holding(input.trackingId).counted = { envId: input.envId, key, windowEndsAt: counted.window_ends_at };
        if (before + i + 1 <= throttling.max) {
          this.verdicts.set(input.trackingId, null);
          continue;
        }
        this.verdicts.set(input.trackingId, 'THROTTLED');
        // Not delivered: an identical send later in the window is not a duplicate of it.
        await this.giveBackDedup(input.trackingId);
      }
    }
  }

  private async giveBackDedup(trackingId: string): Promise<void> {
    const held = this.held.get(trackingId);
    if (!held?.dedup) return;
    await this.repo.releaseDedup(held.dedup.envId, held.dedup.fingerprint, trackingId);
    held.dedup = undefined;
  }

  /** Gives back what the messages not in `committed` hold (their processing rolled back, or another run had done it). */
  async undo(committed: ReadonlySet<string>): Promise<void> {
    for (const [trackingId, held] of this.held) {
      if (committed.has(trackingId)) continue;
      await this.giveBackDedup(trackingId);
      if (held.counted) await this.repo.uncount(held.counted.envId, held.counted.key, 1, held.counted.windowEndsAt);
      this.held.delete(trackingId);
    }
  }
}
