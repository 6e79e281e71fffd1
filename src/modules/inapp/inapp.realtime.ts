import type { WebSocket } from 'ws';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock, Ids } from '../../clock.js';
import type { Config } from '../../config.js';
import type { Storage } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import { SocketHub } from '../../realtime/hub.js';
import { MAX_NOTIFY_BYTES, PgListener, pgNotify, pgNotifyMany } from '../../realtime/pg-notify.js';
import { Batcher, type Settled } from '../../storage/batcher.js';
import { type InappNotification, toInappNotification } from './inapp.model.js';
import { InappRepository, type InappScope } from './inapp.repository.js';
import { SocketCaps } from './inapp.socket-caps.js';

/** The message the published in-app client acts on. */
export const NEW_NOTIFICATIONS_ROUTE = 'inapp_web/new_notifications';
/**
 * Notifications removed by a retract: `{route, payload: {trackingIds}}` (a notification's `id` is
 * its trackingId). The published client ignores routes it does not know; it sees the removal on
 * its next fetch.
 */
export const RETRACTED_NOTIFICATIONS_ROUTE = 'inapp_web/retracted_notifications';
/** Retracted ids per NOTIFY: ~40 bytes each, well inside a NOTIFY payload. */
const RETRACTED_IDS_PER_NOTIFY = 100;
/** NOTIFY payloads sent in one statement at most (each under 8,000 bytes). */
const NOTIFIES_PER_STATEMENT = 256;
export const INAPP_NOTIFY_CHANNEL = 'clarion_inapp';

/**
 * Close code of the sockets of an environment whose credentials changed (secure mode switched on,
 * secret reset): the client must reconnect with a (new) user hash.
 */
export const CLOSE_CREDENTIALS_CHANGED = 4003;
const CREDENTIALS_CHANGED_REASON = 'environment credentials changed; reconnect';

/**
 * What crosses processes over NOTIFY: the notifications themselves, or their ids when too large;
 * `r`: the tracking ids of retracted notifications; or `close`: close every socket of
 * environment `e` with that code.
 */
interface FanoutMessage {
  o: string;
  a: string;
  e: string;
  u?: string;
  n?: InappNotification[];
  ids?: string[];
  r?: string[];
  close?: number;
}

const keyOf = (envId: string, userId: string) => `${envId}\u0000${userId}`;

/** What the realtime needs of the composition root (Deps), which builds it once per process. */
export interface InappRealtimeDeps {
  config: Config;
  storage: Storage;
  db: Kysely<CoreTables>;
  logger: Logger;
  clock: Clock;
  ids: Ids;
}

/**
 * In-app realtime: the sockets of this process per (environment, user), and on PostgreSQL a
 * NOTIFY/LISTEN bridge so a notification stored by any process reaches sockets held by any other.
 */
export class InappRealtime {
  readonly hub = new SocketHub();
  /** The caps per environment and per process (the per-user one is the hub's). */
  readonly caps: SocketCaps;
  /** Lets this process skip its own NOTIFY echoes: it already pushed to its sockets directly (a UUID, unique across processes). */
  private readonly origin: string;
  private listener: PgListener | undefined;
  /** Remote messages are handled one after another so a row read back cannot overtake later pushes. */
  private remoteQueue: Promise<void> = Promise.resolve();
  /** Local pushes of stored rows (publishStored), one after another for the same reason. */
  private localReads: Promise<void> = Promise.resolve();
  /** Per environment whose sockets were closed for changed credentials, how many times (bounded by the environments). */
  private readonly closedEpochs = new Map<string, number>();

  /**
   * The NOTIFYs of new, changed and retracted notifications, those submitted while one statement
   * runs sent together by the next, in order. The delivery worker publishes each in-app message of a batch after its
   * commit: one autocommit round trip each was, on PostgreSQL, one of the in-app message's six
   * (measured: drain of an in-app backlog, issue 11).
   */
  private readonly notifies: Batcher<string, void>;

  constructor(private readonly deps: InappRealtimeDeps) {
    this.origin = deps.ids.uuid();
    this.caps = new SocketCaps({
      maxSocketsPerEnvironment: deps.config.inappMaxSocketsPerEnvironment,
      maxSocketsPerProcess: deps.config.inappMaxSocketsPerProcess,
      logger: deps.logger,
      clock: deps.clock,
    });
    this.notifies = new Batcher((payloads) => this.notifyAll(payloads), NOTIFIES_PER_STATEMENT);
  }

  /** One statement for the payloads; a failure is logged, never thrown (the rows are written: other processes' clients see them on their next fetch). */
  private async notifyAll(payloads: string[]): Promise<Settled<void>[]> {
    try {
      await pgNotifyMany(this.deps.db, INAPP_NOTIFY_CHANNEL, payloads);
    } catch (err) {
      this.deps.logger.warn({ err, notifications: payloads.length }, 'in-app NOTIFY failed');
    }
    return payloads.map(() => ({ ok: true, value: undefined }));
  }

  /**
   * Changes each time the environment's sockets are closed for changed credentials. A socket is
   * authenticated before it is attached: taken before authenticating and passed to attach(), it
   * catches a close that ran in between (which found no socket to close).
   */
  credentialsEpoch(envId: string): number {
    return this.closedEpochs.get(envId) ?? 0;
  }

  attach(scope: InappScope, socket: WebSocket, epoch?: number): void {
    if (epoch !== undefined && epoch !== this.credentialsEpoch(scope.envId)) {
      socket.close(CLOSE_CREDENTIALS_CHANGED, CREDENTIALS_CHANGED_REASON);
      return;
    }
    if (!this.caps.admit(scope, socket)) return;
    this.hub.add(keyOf(scope.envId, scope.userId), socket);
  }

  connections(envId: string, userId: string): number {
    return this.hub.count(keyOf(envId, userId));
  }

  /** Pushes to this process's sockets at once, then (PostgreSQL) to the other processes. */
  async publish(scope: InappScope, notifications: InappNotification[]): Promise<void> {
    if (notifications.length === 0) return;
    this.pushLocal(scope, notifications);
    if (this.deps.storage.dialect !== 'postgres') return;
    // Submitted now, in order: concurrent publishes share a statement (notifies).
    await Promise.all([...this.fanoutPayloads(scope, notifications)].map((payload) => this.notifies.submit(payload)));
  }

  /** Tells the user's sockets, here and (PostgreSQL) in the other processes, that these notifications were retracted. */
  async publishRetracted(scope: InappScope, trackingIds: string[]): Promise<void> {
    if (trackingIds.length === 0) return;
    this.pushRetractedLocal(scope, trackingIds);
    if (this.deps.storage.dialect !== 'postgres') return;
    const sent: Promise<void>[] = [];
    for (let i = 0; i < trackingIds.length; i += RETRACTED_IDS_PER_NOTIFY) {
      const message: FanoutMessage = { o: this.origin, a: scope.accountId, e: scope.envId, u: scope.userId, r: trackingIds.slice(i, i + RETRACTED_IDS_PER_NOTIFY) };
      sent.push(this.notifies.submit(JSON.stringify(message)));
    }
    await Promise.all(sent);
  }

  /**
   * Pushes notifications that were updated in place (an in-app batch that counted another send)
   * in the same message as new ones: the published client knows only `new_notifications`, and
   * one carrying an id it already holds is that notification's latest state. Each push reads the
   * rows when it goes out, one push after another in this process, and other processes are sent
   * the ids only (they read the rows when they handle them, in NOTIFY order): so whatever order
   * concurrent updates committed and published in, the last push a socket gets shows the state
   * after the last of them.
   */
  async publishStored(scope: InappScope, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const local = (this.localReads = this.localReads.then(() => this.pushStored(scope, ids)));
    await local;
    if (this.deps.storage.dialect !== 'postgres') return;
    await this.notifies.submit(JSON.stringify({ o: this.origin, a: scope.accountId, e: scope.envId, u: scope.userId, ids } satisfies FanoutMessage));
  }

  /**
   * Closes every in-app socket of the environment, in this process at once and (PostgreSQL) in the
   * others: sockets authenticated under the old rules must not outlive them.
   */
  async closeEnvironment(accountId: string, envId: string, code = CLOSE_CREDENTIALS_CHANGED): Promise<void> {
    this.closeLocal(envId, code);
    if (this.deps.storage.dialect !== 'postgres') return;
    const message: FanoutMessage = { o: this.origin, a: accountId, e: envId, close: code };
    await pgNotify(this.deps.db, INAPP_NOTIFY_CHANNEL, JSON.stringify(message));
  }

  /** Starts the LISTEN side when on PostgreSQL and its URL is configured. */
  async listen(): Promise<boolean> {
    const url = this.deps.config.databaseUrl;
    if (this.listener || this.deps.storage.dialect !== 'postgres' || !url) return Boolean(this.listener);
    this.listener = new PgListener(url, INAPP_NOTIFY_CHANNEL, (payload) => {
      this.remoteQueue = this.remoteQueue.then(() => this.onRemote(payload));
    }, this.deps.logger);
    await this.listener.start();
    return true;
  }

  async close(): Promise<void> {
    this.hub.close();
    await this.listener?.close();
    this.listener = undefined;
  }

  private closeLocal(envId: string, code: number): number {
    this.closedEpochs.set(envId, this.credentialsEpoch(envId) + 1);
    return this.hub.closeWhere((key) => key.startsWith(keyOf(envId, '')), code, CREDENTIALS_CHANGED_REASON);
  }

  private pushLocal(scope: Pick<InappScope, 'envId' | 'userId'>, notifications: InappNotification[]): number {
    const key = keyOf(scope.envId, scope.userId);
    if (this.hub.count(key) === 0) return 0;
    return this.hub.send(key, JSON.stringify({ route: NEW_NOTIFICATIONS_ROUTE, payload: { notifications } }));
  }

  private pushRetractedLocal(scope: Pick<InappScope, 'envId' | 'userId'>, trackingIds: string[]): number {
    const key = keyOf(scope.envId, scope.userId);
    if (this.hub.count(key) === 0) return 0;
    return this.hub.send(key, JSON.stringify({ route: RETRACTED_NOTIFICATIONS_ROUTE, payload: { trackingIds } }));
  }

  /** Reads and pushes `ids` to this process's sockets of the user, if it holds any; never throws. */
  private async pushStored(scope: InappScope, ids: string[]): Promise<void> {
    if (this.connections(scope.envId, scope.userId) === 0) return;
    try {
      const rows = await new InappRepository(this.deps.db).findMany(scope, ids);
      if (rows.length > 0) this.pushLocal(scope, rows.map(toInappNotification));
    } catch (err) {
      this.deps.logger.warn({ err }, 'could not push an updated in-app notification');
    }
  }

  private *fanoutPayloads(scope: InappScope, notifications: InappNotification[]): Generator<string> {
    const base = { o: this.origin, a: scope.accountId, e: scope.envId, u: scope.userId };
    const whole = JSON.stringify({ ...base, n: notifications } satisfies FanoutMessage);
    if (Buffer.byteLength(whole) <= MAX_NOTIFY_BYTES) {
      yield whole;
      return;
    }
    for (const notification of notifications) {
      const one = JSON.stringify({ ...base, n: [notification] } satisfies FanoutMessage);
      yield Buffer.byteLength(one) <= MAX_NOTIFY_BYTES ? one : JSON.stringify({ ...base, ids: [notification.id] } satisfies FanoutMessage);
    }
  }

  private async onRemote(payload: string): Promise<void> {
    try {
      const message = JSON.parse(payload) as FanoutMessage;
      if (message.o === this.origin) return;
      if (message.close !== undefined) {
        this.closeLocal(message.e, message.close);
        return;
      }
      if (message.u === undefined || this.connections(message.e, message.u) === 0) return;
      if (message.r) {
        this.pushRetractedLocal({ envId: message.e, userId: message.u }, message.r);
        return;
      }
      let notifications = message.n;
      if (!notifications && message.ids) {
        const scope: InappScope = { accountId: message.a, envId: message.e, userId: message.u };
        notifications = (await new InappRepository(this.deps.db).findMany(scope, message.ids)).map(toInappNotification);
      }
      if (notifications?.length) this.pushLocal({ envId: message.e, userId: message.u }, notifications);
    } catch (err) {
      this.deps.logger.warn({ err }, 'could not fan out an in-app notification');
    }
  }
}
