import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import { invalid, notFound } from '../../errors.js';
import type { Channel } from '../../http/schemas.js';
import type { CoreTables } from '../../storage/schema.js';
import { type UserCursor, type UserRow, UsersRepository } from './users.repository.js';
import { type TokenSealer, isSealedSlackToken, maskSlackToken, nextSlackTokenColumn, openSlackToken, sealSlackToken } from './slack-token.js';
import type { IdentifyPatch, Properties, PushToken, SlackToken, Suppressions, User, UserPage, WebPushToken } from './users.types.js';
import { checkPropertyLimits, normalizePhoneNumber, parseIdentifyInput, validateEmail, validateUserId } from './users.validation.js';

export type * from './users.types.js';

/** Raw identify input (HTTP body or a send's `to`); validated by the service. */
export type IdentifyInput = { id: string } & Record<string, unknown>;

export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 1000;

const USER_NOT_FOUND_FIX = 'Create the user with POST /users/{userId} first, or check the environment of your credentials.';

/**
 * Users of one environment: identify (create or merge), read, list, delete, per-channel
 * suppressions. Used by the HTTP routes and by the sending pipeline (upsertFromRecipient,
 * setSuppression), so it takes plain values and raises AppErrors, never HTTP objects.
 */
export class UsersService {
  constructor(private readonly deps: Pick<Deps, 'db' | 'storage' | 'clock' | 'secrets'>) {}

  private get lockRows(): boolean {
    return this.deps.storage.dialect === 'postgres';
  }

  /**
   * Creates the user or merges `input` into it: fields present replace the stored ones, absent
   * fields are preserved, null (or "") clears a field. `properties` are shallow-merged key by
   * key; a property set to null is deleted (so clients can remove a key without resending the
   * rest). Limits are checked on the input and on the merged result. `lastSeenTime` moves to
   * now unless `touchLastSeen` is false (a send to a user is not the user being seen).
   */
  async identify(
    accountId: string,
    envId: string,
    input: IdentifyInput,
    options: { touchLastSeen?: boolean; trx?: Kysely<CoreTables> } = {},
  ): Promise<User> {
    const userId = validateUserId(input?.id, 'id');
    const patch = parseIdentifyInput(input);
    const touchLastSeen = options.touchLastSeen ?? true;
    const now = this.deps.clock.now().toISOString();

    return this.inTransaction(options.trx, async (trx) => {
      const repo = new UsersRepository(trx, this.lockRows);
      const secrets = this.deps.secrets;
      const created = applyPatch(emptyRow(accountId, envId, userId, now), patch, now, true, secrets);
      // One statement in the common "new user" case; on conflict fall through to merge.
      if (await repo.insertIfAbsent(created)) return toUser(created, secrets);
      const current = await repo.findForUpdate(accountId, envId, userId);
      if (!current) throw notFound('User', userId, USER_NOT_FOUND_FIX);
      const next = applyPatch(current, patch, now, touchLastSeen, secrets);
      await repo.update(accountId, envId, userId, next);
      return toUser(next, secrets);
    });
  }

  /**
   * Upserts the recipient of a send. Rule: the user id is `to.id`; without one it is `to.email`,
   * else `to.number` in E.164 (so "(415) 555-0123" and "+14155550123" are the same user).
   * Provided contact fields update the stored user; `lastSeenTime` is not moved for an
   * existing user. Pass `trx` to upsert inside the caller's transaction (the send's outbox write).
   */
  async upsertFromRecipient(accountId: string, envId: string, to: unknown, trx?: Kysely<CoreTables>): Promise<User> {
    return this.upsertRecipient(accountId, envId, parseRecipient(to), trx);
  }

  /** upsertFromRecipient for a recipient already validated by parseRecipient. */
  async upsertRecipient(accountId: string, envId: string, { userId, patch }: Recipient, trx?: Kysely<CoreTables>): Promise<User> {
    const now = this.deps.clock.now().toISOString();
    return this.inTransaction(trx, async (db) => {
      const repo = new UsersRepository(db, this.lockRows);
      // Read without a lock first: a send that changes nothing in the user (the usual repeat
      // send) then writes nothing and does not queue behind other sends to the same user.
      const secrets = this.deps.secrets;
      let plan = planRecipientUpsert(await repo.find(accountId, envId, userId), accountId, envId, userId, patch, now, secrets);
      if (plan.write === 'update' && this.lockRows) {
        plan = planRecipientUpsert(await repo.findForUpdate(accountId, envId, userId), accountId, envId, userId, patch, now, secrets);
      }
      if (plan.write === 'insert' && !(await repo.insertIfAbsent(plan.row))) {
        // Created by a concurrent request since the read: merge into that one.
        plan = planRecipientUpsert(await repo.findForUpdate(accountId, envId, userId), accountId, envId, userId, patch, now, secrets);
      }
      if (plan.write === 'update') await repo.update(accountId, envId, userId, plan.row);
      return toUser(plan.row, secrets);
    });
  }

  async get(accountId: string, envId: string, userId: string): Promise<User | null> {
    const row = await new UsersRepository(this.deps.db).find(accountId, envId, userId);
    return row ? toUser(row, this.deps.secrets) : null;
  }

  /**
   * Where a Slack message to this user goes and the user's own token, unmasked: for the Slack
   * executor only (every other read masks the token). Null when the user does not exist.
   */
  async slackDestination(accountId: string, envId: string, userId: string): Promise<{ channel?: string; token?: SlackToken } | null> {
    const row = await new UsersRepository(this.deps.db).find(accountId, envId, userId);
    if (!row) return null;
    const json = openSlackToken(this.deps.secrets, row.slack_token);
    return { ...(row.slack_channel !== null ? { channel: row.slack_channel } : {}), ...(json ? { token: JSON.parse(json) as SlackToken } : {}) };
  }

  /** Like get, but an absent user is a NOT_FOUND error. */
  async require(accountId: string, envId: string, userId: string): Promise<User> {
    const user = await this.get(accountId, envId, userId);
    if (!user) throw notFound('User', userId, USER_NOT_FOUND_FIX);
    return user;
  }

  async delete(accountId: string, envId: string, userId: string): Promise<void> {
    if (!(await new UsersRepository(this.deps.db).delete(accountId, envId, userId))) throw notFound('User', userId, USER_NOT_FOUND_FIX);
  }

  /** Newest first. `nextToken` is the `lastEvaluatedKey` of the previous page ('' or absent: first page). */
  async list(accountId: string, envId: string, options: { limit?: number; nextToken?: string } = {}): Promise<UserPage> {
    const limit = options.limit ?? LIST_LIMIT_DEFAULT;
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) {
      throw invalid(`limit must be an integer from 1 to ${LIST_LIMIT_MAX}.`, `Omit limit for pages of ${LIST_LIMIT_DEFAULT}.`);
    }
    const after = options.nextToken ? decodeCursor(options.nextToken) : undefined;
    const rows = await new UsersRepository(this.deps.db).list(accountId, envId, limit + 1, after);
    const hasMore = rows.length > limit;
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      users: page.map((row) => toUser(row, this.deps.secrets)),
      hasMore,
      ...(hasMore && last ? { lastEvaluatedKey: encodeCursor({ createdAt: last.created_at, id: last.id }) } : {}),
    };
  }

  /** Records that `channel` must not be used for this user (e.g. an email bounce). Null when the user does not exist. */
  async setSuppression(
    accountId: string,
    envId: string,
    userId: string,
    channel: Channel,
    suppression: { reason: string; details?: Record<string, unknown> },
    trx?: Kysely<CoreTables>,
  ): Promise<User | null> {
    return this.changeSuppressions(
      accountId,
      envId,
      userId,
      (map, now) => {
        map[channel] = { reason: suppression.reason, details: suppression.details ?? {}, at: now };
      },
      trx,
    );
  }

  /** Removes the suppression of one channel (idempotent); NOT_FOUND when the user does not exist. */
  async clearSuppression(accountId: string, envId: string, userId: string, channel: Channel, trx?: Kysely<CoreTables>): Promise<User> {
    const user = await this.changeSuppressions(
      accountId,
      envId,
      userId,
      (map) => {
        delete map[channel];
      },
      trx,
    );
    if (!user) throw notFound('User', userId, USER_NOT_FOUND_FIX);
    return user;
  }

  /** The stored suppressions of a user, per channel (for the sending pipeline's routing). */
  /** The user with the channels they are suppressed on, in one read (the delivery worker's view). */
  async getWithSuppressions(accountId: string, envId: string, userId: string): Promise<{ user: User; suppressions: Suppressions } | null> {
    const row = await new UsersRepository(this.deps.db).find(accountId, envId, userId);
    return row ? { user: toUser(row, this.deps.secrets), suppressions: parseJson<Suppressions>(row.suppressions) ?? {} } : null;
  }

  /** getWithSuppressions for several users of one environment, in one read; absent users are left out. */
  async getManyWithSuppressions(accountId: string, envId: string, userIds: string[]): Promise<Map<string, { user: User; suppressions: Suppressions }>> {
    const rows = await new UsersRepository(this.deps.db).findMany(accountId, envId, userIds);
    return new Map(rows.map((row) => [row.id, { user: toUser(row, this.deps.secrets), suppressions: parseJson<Suppressions>(row.suppressions) ?? {} }]));
  }

  async suppressions(accountId: string, envId: string, userId: string): Promise<Suppressions> {
    const row = await new UsersRepository(this.deps.db).find(accountId, envId, userId);
    return row ? parseJson<Suppressions>(row.suppressions) ?? {} : {};
  }

  /**
   * Removes mobile push tokens a provider reported as gone (APNs Unregistered, FCM UNREGISTERED),
   * matching on the token string. Returns the tokens that were removed ([] when the user or the
   * tokens no longer exist); updatedAt moves only when something was removed.
   */
  removePushTokens(accountId: string, envId: string, userId: string, tokens: string[]): Promise<string[]> {
    if (tokens.length === 0) return Promise.resolve([]);
    const gone = new Set(tokens);
    return this.editPushTokens(accountId, envId, userId, (current) => {
      const removed = current.filter((t) => gone.has(t.token)).map((t) => t.token);
      return { tokens: current.filter((t) => !gone.has(t.token)), changed: removed };
    });
  }

  /**
   * Files APNs tokens under the environment whose gateway accepted them (`environments`: token ->
   * 'production' | 'sandbox'), so the next push does not first ask the other gateway. Returns
   * the tokens whose environment changed; updatedAt moves only then.
   */
  setPushTokenEnvironments(accountId: string, envId: string, userId: string, environments: Map<string, string>): Promise<string[]> {
    if (environments.size === 0) return Promise.resolve([]);
    return this.editPushTokens(accountId, envId, userId, (current) => {
      const changed: string[] = [];
      const tokens = current.map((t) => {
        const environment = t.type === 'APN' ? environments.get(t.token) : undefined;
        if (environment === undefined || environment === t.environment) return t;
        changed.push(t.token);
        return { ...t, environment };
      });
      return { tokens, changed };
    });
  }

  /** Reads the user's mobile push tokens under a row lock and writes back `edit`'s list when it changed any. */
  private async editPushTokens(
    accountId: string,
    envId: string,
    userId: string,
    edit: (current: PushToken[]) => { tokens: PushToken[]; changed: string[] },
  ): Promise<string[]> {
    return this.inTransaction(undefined, async (trx) => {
      const repo = new UsersRepository(trx, this.lockRows);
      const row = await repo.findForUpdate(accountId, envId, userId);
      if (!row) return [];
      const { tokens, changed } = edit(parseJson<PushToken[]>(row.push_tokens) ?? []);
      if (changed.length === 0) return [];
      await repo.update(accountId, envId, userId, { push_tokens: jsonOrNull(tokens), updated_at: this.deps.clock.now().toISOString() });
      return changed;
    });
  }

  /**
   * Removes browser push subscriptions a push service answered 404/410 for, matching on the
   * endpoint. Returns the endpoints removed ([] when the user or the subscriptions are gone already).
   */
  async removeWebPushSubscriptions(accountId: string, envId: string, userId: string, endpoints: string[]): Promise<string[]> {
    if (endpoints.length === 0) return [];
    const gone = new Set(endpoints);
    return this.inTransaction(undefined, async (trx) => {
      const repo = new UsersRepository(trx, this.lockRows);
      const row = await repo.findForUpdate(accountId, envId, userId);
      const current = row ? parseJson<WebPushToken[]>(row.web_push_tokens) ?? [] : [];
      const kept = current.filter((t) => !gone.has(t.sub.endpoint));
      if (kept.length === current.length) return [];
      const now = this.deps.clock.now().toISOString();
      await repo.update(accountId, envId, userId, { web_push_tokens: jsonOrNull(kept), updated_at: now });
      return current.filter((t) => gone.has(t.sub.endpoint)).map((t) => t.sub.endpoint);
    });
  }

  /** Runs `work` in the caller's transaction when given (Kysely cannot nest them), else in a new one. */
  private inTransaction<T>(trx: Kysely<CoreTables> | undefined, work: (db: Kysely<CoreTables>) => Promise<T>): Promise<T> {
    return trx ? work(trx) : this.deps.db.transaction().execute(work);
  }

  private changeSuppressions(
    accountId: string,
    envId: string,
    userId: string,
    change: (map: Suppressions, now: string) => void,
    outer?: Kysely<CoreTables>,
  ): Promise<User | null> {
    const now = this.deps.clock.now().toISOString();
    return this.inTransaction(outer, async (trx) => {
      const repo = new UsersRepository(trx, this.lockRows);
      const row = await repo.findForUpdate(accountId, envId, userId);
      if (!row) return null;
      const map = parseJson<Suppressions>(row.suppressions) ?? {};
      change(map, now);
      const next: UserRow = { ...row, suppressions: Object.keys(map).length > 0 ? JSON.stringify(map) : null, updated_at: now };
      await repo.update(accountId, envId, userId, { suppressions: next.suppressions, updated_at: now });
      return toUser(next, this.deps.secrets);
    });
  }
}

/** A send's recipient: the user id and the validated fields it carries. */
export interface Recipient {
  userId: string;
  patch: IdentifyPatch;
}

/**
 * Validates a send's `to`. Rule: the user id is `to.id`; without one it is `to.email`, else
 * `to.number` in E.164 (so "(415) 555-0123" and "+14155550123" are the same user).
 */
export function parseRecipient(to: unknown): Recipient {
  if (typeof to !== 'object' || to === null || Array.isArray(to)) {
    throw invalid('to must be a user object.', 'Send to: {id?, email?, number?, ...}.');
  }
  const recipient = to as Record<string, unknown>;
  let userId: string;
  if (recipient.id !== undefined && recipient.id !== null && recipient.id !== '') userId = validateUserId(recipient.id, 'to.id');
  else if (typeof recipient.email === 'string' && recipient.email !== '') userId = validateEmail(recipient.email, 'to.email');
  else if (typeof recipient.number === 'string' && recipient.number !== '') userId = normalizePhoneNumber(recipient.number, 'to.number');
  else throw invalid('to needs an id, an email or a number to identify the recipient.', 'Add to.id (or to.email / to.number).');
  return { userId, patch: parseIdentifyInput({ ...recipient, id: userId }) };
}

/**
 * What a send's recipient writes: a new row, an updated row, or nothing when the stored user
 * already holds every field the send carries (the common case of repeated sends, which then
 * cost one read). Provided fields replace stored ones; `lastSeenTime` does not move (a send to
 * a user is not the user being seen).
 */
export function planRecipientUpsert(
  current: UserRow | undefined,
  accountId: string,
  envId: string,
  userId: string,
  patch: IdentifyPatch,
  now: string,
  secrets: TokenSealer,
): { row: UserRow; write: 'insert' | 'update' | null } {
  if (!current) return { row: applyPatch(emptyRow(accountId, envId, userId, now), patch, now, true, secrets), write: 'insert' };
  const columns = patchedColumns(current, patch, secrets);
  for (const column in columns) {
    if (columns[column as keyof UserRow] !== current[column as keyof UserRow]) {
      return { row: { ...current, ...columns, updated_at: now }, write: 'update' };
    }
  }
  return { row: current, write: null };
}

/** The user column each patch field is stored in (see applyPatch). */
const PATCH_COLUMNS = {
  email: 'email',
  number: 'number',
  timezone: 'timezone',
  slackChannel: 'slack_channel',
  slackToken: 'slack_token',
  pushTokens: 'push_tokens',
  webPushTokens: 'web_push_tokens',
  properties: 'properties',
} as const satisfies Record<keyof IdentifyPatch, keyof UserRow>;

/**
 * The stored columns from which planRecipientUpsert can tell whether `patch` changes a user, as
 * a comma list: those the patch sets, plus email and number (a send records them). Given a row
 * of only these, its answer "nothing to write" is final; a write must be planned again from the
 * whole row. Why: better-sqlite3 builds a 15-column row object in about 3 µs, most of the cost
 * of reading the recipient on every send. The same patch shape gives the same string.
 */
export function recipientColumns(patch: IdentifyPatch): string {
  let mask = 0;
  for (const field in patch) mask |= PATCH_BITS[field as keyof IdentifyPatch] ?? 0;
  return COLUMN_LISTS[mask];
}

const PATCH_FIELDS = Object.keys(PATCH_COLUMNS) as (keyof IdentifyPatch)[];
const PATCH_BITS = Object.fromEntries(PATCH_FIELDS.map((field, bit) => [field, 1 << bit])) as Record<keyof IdentifyPatch, number>;
/**
 * The column list of every patch shape (mask of the fields it sets), computed once at load: 2^8
 * short strings, a constant table rather than a cache that fills as sends arrive.
 */
const COLUMN_LISTS: readonly string[] = Object.freeze(
  Array.from({ length: 1 << PATCH_FIELDS.length }, (_, mask) => {
    const names = new Set<string>(['email', 'number']);
    PATCH_FIELDS.forEach((field, bit) => mask & (1 << bit) && names.add(PATCH_COLUMNS[field]));
    return [...names].join(', ');
  }),
);

/** A user with no contact yet, created at `now`: what identify starts from (tests seed users from it too). */
export function emptyRow(accountId: string, envId: string, id: string, now: string): UserRow {
  return {
    env_id: envId,
    id,
    account_id: accountId,
    email: null,
    number: null,
    push_tokens: null,
    web_push_tokens: null,
    timezone: null,
    slack_channel: null,
    slack_token: null,
    properties: null,
    suppressions: null,
    last_seen_time: now,
    created_at: now,
    updated_at: now,
  };
}

const jsonOrNull = (value: unknown[] | object | null | undefined) =>
  value === null || value === undefined || (Array.isArray(value) && value.length === 0) ? null : JSON.stringify(value);

/** Pure merge of a validated patch into a stored row. */
export function applyPatch(row: UserRow, patch: IdentifyPatch, now: string, touchLastSeen: boolean, secrets: TokenSealer): UserRow {
  return { ...row, ...patchedColumns(row, patch, secrets), updated_at: now, last_seen_time: touchLastSeen ? now : row.last_seen_time };
}

/** The stored values of the columns `patch` sets, merged with `row` where a field merges (properties). */
function patchedColumns(row: Partial<UserRow>, patch: IdentifyPatch, secrets: TokenSealer): Partial<UserRow> {
  const columns: Partial<UserRow> = {};
  if (patch.email !== undefined) columns.email = patch.email;
  if (patch.number !== undefined) columns.number = patch.number;
  if (patch.timezone !== undefined) columns.timezone = patch.timezone;
  if (patch.slackChannel !== undefined) columns.slack_channel = patch.slackChannel;
  if (patch.slackToken !== undefined) columns.slack_token = nextSlackTokenColumn(secrets, row.slack_token, jsonOrNull(patch.slackToken));
  // A token stored before tokens were sealed is sealed by the first write that reads it.
  else if (typeof row.slack_token === 'string' && !isSealedSlackToken(row.slack_token)) columns.slack_token = sealSlackToken(secrets, row.slack_token);
  if (patch.pushTokens !== undefined) columns.push_tokens = jsonOrNull(patch.pushTokens);
  if (patch.webPushTokens !== undefined) columns.web_push_tokens = jsonOrNull(patch.webPushTokens);
  if (patch.properties !== undefined) {
    // No prototype: a property named "__proto__" stays an ordinary key.
    const merged: Properties = Object.assign(Object.create(null) as Properties, parseJson<Properties>(row.properties ?? null));
    for (const [key, value] of Object.entries(patch.properties)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    checkPropertyLimits(merged, 'properties (merged with the stored ones)');
    columns.properties = Object.keys(merged).length > 0 ? JSON.stringify(merged) : null;
  }
  return columns;
}

function parseJson<T>(text: string | null): T | undefined {
  return text === null ? undefined : (JSON.parse(text) as T);
}

/** A user as every read shows it: the slackToken's credentials masked. */
export function toUser(row: UserRow, secrets: TokenSealer): User {
  const user: User = { id: row.id, lastSeenTime: row.last_seen_time, createdAt: row.created_at, updatedAt: row.updated_at };
  if (row.email !== null) user.email = row.email;
  if (row.number !== null) user.number = row.number;
  const pushTokens = parseJson<PushToken[]>(row.push_tokens);
  if (pushTokens) user.pushTokens = pushTokens;
  const webPushTokens = parseJson<WebPushToken[]>(row.web_push_tokens);
  if (webPushTokens) user.webPushTokens = webPushTokens;
  if (row.timezone !== null) user.timezone = row.timezone;
  if (row.slack_channel !== null) user.slackChannel = row.slack_channel;
  const slackToken = parseJson<SlackToken>(openSlackToken(secrets, row.slack_token));
  if (slackToken) user.slackToken = maskSlackToken(slackToken);
  const properties = parseJson<Properties>(row.properties);
  if (properties) user.properties = properties;
  const email = parseJson<Suppressions>(row.suppressions)?.EMAIL;
  if (email) user.emailSuppressionStatus = { reason: email.reason, details: email.details };
  return user;
}

export function encodeCursor(cursor: UserCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt, cursor.id]), 'utf8').toString('base64url');
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export function decodeCursor(token: string): UserCursor {
  const bad = () => invalid('nextToken is not a valid page token.', 'Pass the lastEvaluatedKey of the previous page unchanged, or an empty nextToken for the first page.');
  if (!/^[A-Za-z0-9_-]{1,2000}$/.test(token)) throw bad();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string' || !ISO_TIME.test(parsed[0])) {
    throw bad();
  }
  return { createdAt: parsed[0], id: parsed[1] };
}
