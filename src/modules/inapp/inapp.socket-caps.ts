import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { Clock } from '../../clock.js';
import { CLOSE_TOO_MANY_SOCKETS, closeWithin } from '../../realtime/hub.js';
import type { InappScope } from './inapp.repository.js';

/**
 * Default cap of the in-app sockets one environment holds in a process (the per-user cap is the
 * hub's): anyone with a clientId can open sockets for made-up users, and must not take the
 * other environments' share.
 */
export const MAX_SOCKETS_PER_ENVIRONMENT = 10_000;
/** Default cap of the in-app sockets of a process, all environments together (lowered by a small open-file limit). */
export const MAX_SOCKETS_PER_PROCESS = 50_000;
/** Share of the open-file limit the sockets may take by default; the rest is for requests, database and SMTP connections, files. */
const SOCKETS_SHARE_OF_OPEN_FILES = 0.75;
/** A refusal is logged at most this often per environment: a flood of sockets must not flood the log. */
const REFUSAL_LOG_INTERVAL_MS = 60_000;
/** A refused socket that does not answer its close frame is cut off after this long, not ws's 30 s (it would hold its descriptor). */
const REFUSED_CLOSE_GRACE_MS = 1_000;
const REFUSAL_REASONS = {
  environment: 'too many sockets for this environment',
  process: 'too many sockets in this server process',
} as const;
type SocketCap = keyof typeof REFUSAL_REASONS;

/** The soft open-file limit of this process (Node raises it to the hard one at start), where /proc tells it. */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.trim().split(/\s+/)[3]);
    return Number.isSafeInteger(soft) && soft > 0 ? soft : undefined;
  } catch {
    return undefined;
  }
}

/** The process cap when none is configured: MAX_SOCKETS_PER_PROCESS, or less if the open files could not hold that many beside the rest. */
export function defaultMaxSocketsPerProcess(openFiles: number | undefined): number {
  if (openFiles === undefined) return MAX_SOCKETS_PER_PROCESS;
  return Math.max(1, Math.min(MAX_SOCKETS_PER_PROCESS, Math.floor(openFiles * SOCKETS_SHARE_OF_OPEN_FILES)));
}

export interface SocketCapsOptions {
  /** Open sockets per environment; one more is refused (default MAX_SOCKETS_PER_ENVIRONMENT). */
  maxSocketsPerEnvironment?: number;
  /** Open sockets in all; one more is refused (default defaultMaxSocketsPerProcess of this process's open-file limit). */
  maxSocketsPerProcess?: number;
  logger: Logger;
  clock: Clock;
}

/**
 * The in-app sockets this process holds per environment and in all, and the caps on them. A
 * socket is counted from admit() until it has closed (ws's 'close', which every socket emits once,
 * however it ends: close, error, terminate, shutdown), as its descriptor is held until then.
 */
export class SocketCaps {
  readonly maxSocketsPerEnvironment: number;
  readonly maxSocketsPerProcess: number;
  private readonly perEnvironment = new Map<string, number>();
  private total = 0;
  /** Per environment, when a refusal was last logged and how many since (bounded by the environments). */
  private readonly refusals = new Map<string, { loggedAt: number; since: number }>();

  constructor(private readonly options: SocketCapsOptions) {
    this.maxSocketsPerEnvironment = options.maxSocketsPerEnvironment ?? MAX_SOCKETS_PER_ENVIRONMENT;
    this.maxSocketsPerProcess = options.maxSocketsPerProcess ?? defaultMaxSocketsPerProcess(openFileLimit());
  }

  /** Sockets held for the environment, or (no envId) in all. */
  held(envId?: string): number {
    return envId === undefined ? this.total : (this.perEnvironment.get(envId) ?? 0);
  }

  /**
   * Counts the socket, or refuses it past a cap: the new socket is closed, not an open one (unlike
   * the per-user cap), so real users' sockets stay when someone floods made-up ones.
   */
  admit(scope: InappScope, socket: WebSocket): boolean {
    // Already closed (its 'close' has fired): counting it would never be undone.
    if (socket.readyState === socket.CLOSED) return false;
    const cap = this.held(scope.envId) >= this.maxSocketsPerEnvironment ? 'environment' : this.total >= this.maxSocketsPerProcess ? 'process' : undefined;
    if (cap) {
      void closeWithin([socket], CLOSE_TOO_MANY_SOCKETS, REFUSAL_REASONS[cap], REFUSED_CLOSE_GRACE_MS);
      this.logRefusal(scope, cap);
      return false;
    }
    const { envId } = scope;
    this.total++;
    this.perEnvironment.set(envId, this.held(envId) + 1);
    socket.once('close', () => {
      this.total--;
      const left = this.held(envId) - 1;
      if (left > 0) this.perEnvironment.set(envId, left);
      else this.perEnvironment.delete(envId);
    });
    return true;
  }

  /** At most once a minute per environment, with the number refused since the last line; no user, no credential. */
  private logRefusal(scope: InappScope, cap: SocketCap): void {
    const now = this.options.clock.now().getTime();
    const last = this.refusals.get(scope.envId);
    if (last && now - last.loggedAt < REFUSAL_LOG_INTERVAL_MS) {
      last.since++;
      return;
    }
    this.refusals.set(scope.envId, { loggedAt: now, since: 0 });
    const limit = cap === 'environment' ? this.maxSocketsPerEnvironment : this.maxSocketsPerProcess;
    this.options.logger.warn(
      { accountId: scope.accountId, envId: scope.envId, cap, limit, refused: (last?.since ?? 0) + 1 },
      `in-app websocket refused: ${REFUSAL_REASONS[cap]}`,
    );
  }
}
