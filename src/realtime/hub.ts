import type { WebSocket } from 'ws';

export interface SocketHubOptions {
  /** How often every socket is pinged; a socket that has not answered the previous ping is dropped. */
  heartbeatMs?: number;
  /** Open sockets per key; one more closes the oldest (default 10). */
  maxSocketsPerKey?: number;
  /** Unsent bytes a socket may hold (`bufferedAmount`) after a send before it is dropped (default 1 MiB). */
  maxBufferedBytes?: number;
  /**
   * How long a socket the hub closes (at shutdown, over the cap, too much unsent data, by
   * closeWhere) may take to answer its close frame before it is terminated (default SHUTDOWN_CLOSE_GRACE_MS).
   */
  shutdownGraceMs?: number;
}

/** Close codes of the hub (application range 4000-4999). */
export const CLOSE_TOO_MANY_SOCKETS = 4008;
export const CLOSE_TOO_MUCH_UNSENT = 4009;
/** RFC 6455 "going away": every socket is closed with it when the server stops. */
export const CLOSE_GOING_AWAY = 1001;
export const SHUTTING_DOWN_REASON = 'server shutting down';

/**
 * How long a socket has, once the server stops, to answer its close frame before it is
 * terminated. ws waits 30 s by default: one client that never answers (anyone may open a socket)
 * would hold the process past `docker stop`'s 10 s, which kills it before the workers release
 * their jobs. A responsive client answers within a round trip, and one cut off has still read
 * the close frame and its code.
 */
export const SHUTDOWN_CLOSE_GRACE_MS = 1_000;

/**
 * Sends every socket a close frame and terminates those that have not finished closing within
 * `graceMs` (including any already closing for another reason); resolves once all are closed.
 */
export function closeWithin(sockets: Iterable<WebSocket>, code: number, reason: string, graceMs: number): Promise<void> {
  const open = [...sockets].filter((socket) => socket.readyState !== socket.CLOSED);
  if (open.length === 0) return Promise.resolve();
  const closed = open.map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve())));
  for (const socket of open) socket.close(code, reason);
  const deadline = setTimeout(() => {
    for (const socket of open) socket.terminate();
  }, graceMs);
  return Promise.all(closed).then(() => clearTimeout(deadline));
}

/**
 * Open websockets grouped by a key (e.g. environment + user), in this process. Sockets leave
 * their group when they close; dead peers (no pong within a heartbeat) are terminated.
 */
export class SocketHub {
  private readonly groups = new Map<string, Set<WebSocket>>();
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly heartbeatMs: number;
  readonly maxSocketsPerKey: number;
  readonly maxBufferedBytes: number;
  private readonly shutdownGraceMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: SocketHubOptions = {}) {
    this.heartbeatMs = options.heartbeatMs ?? 30_000;
    this.maxSocketsPerKey = options.maxSocketsPerKey ?? 10;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 1024 * 1024;
    this.shutdownGraceMs = options.shutdownGraceMs ?? SHUTDOWN_CLOSE_GRACE_MS;
  }

  /**
   * Adds a socket; over the cap the oldest open one is closed, not the new one: the published
   * in-app client does not reconnect on close, so the newest socket (the tab just opened, or the
   * one a client re-opens every 9 minutes) is the one worth keeping.
   */
  add(key: string, socket: WebSocket): void {
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = new Set()));
    // Sockets already closing (e.g. the one a client just replaced) do not count.
    const open = [...group].filter((s) => s.readyState === s.OPEN);
    for (const oldest of open.slice(0, Math.max(0, open.length - this.maxSocketsPerKey + 1))) {
      this.drop(key, oldest, CLOSE_TOO_MANY_SOCKETS, 'too many sockets for this user; oldest closed');
    }
    group = this.groups.get(key) ?? new Set();
    this.groups.set(key, group);
    group.add(socket);
    this.alive.set(socket, true);
    socket.on('pong', () => this.alive.set(socket, true));
    socket.once('close', () => this.remove(key, socket));
    this.timer ??= setInterval(() => this.beat(), this.heartbeatMs).unref();
  }

  remove(key: string, socket: WebSocket): void {
    const group = this.groups.get(key);
    if (!group) return;
    group.delete(socket);
    if (group.size === 0) this.groups.delete(key);
    if (this.groups.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  count(key: string): number {
    return this.groups.get(key)?.size ?? 0;
  }

  /**
   * Sends one text frame to every open socket of the group; returns how many it went to. A socket
   * whose peer does not read keeps every frame in memory: past the bound it gets no more and is
   * closed (its close frame waits behind the unsent data; it is cut off after the grace).
   */
  send(key: string, text: string): number {
    let sent = 0;
    for (const socket of [...(this.groups.get(key) ?? [])]) {
      if (socket.readyState !== socket.OPEN) continue;
      socket.send(text);
      sent++;
      if (socket.bufferedAmount > this.maxBufferedBytes) this.drop(key, socket, CLOSE_TOO_MUCH_UNSENT, 'too much unsent data');
    }
    return sent;
  }

  /** Closes the sockets of every group whose key matches, with a code the client can act on. */
  closeWhere(match: (key: string) => boolean, code: number, reason: string): number {
    let closed = 0;
    for (const [key, group] of [...this.groups]) {
      if (!match(key)) continue;
      for (const socket of [...group]) {
        this.drop(key, socket, code, reason);
        closed++;
      }
    }
    return closed;
  }

  /**
   * Closes every socket (1001 going away), e.g. on shutdown; one that does not answer within the
   * grace is terminated. Behind Fastify the websocket plugin's preClose (websocket.ts) has closed
   * them the same way already, before the app's onClose hooks call this.
   */
  close(): void {
    const sockets = [...this.groups.values()].flatMap((group) => [...group]);
    this.groups.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    void closeWithin(sockets, CLOSE_GOING_AWAY, SHUTTING_DOWN_REASON, this.shutdownGraceMs);
  }

  /**
   * Leaves the group at once (no further sends), then closes; cut off if the peer does not answer
   * within the grace (ws would wait 30 s, the socket holding its descriptor and its place under
   * the environment's cap: a peer could replace silent sockets faster than they went).
   */
  private drop(key: string, socket: WebSocket, code: number, reason: string): void {
    this.remove(key, socket);
    void closeWithin([socket], code, reason, this.shutdownGraceMs);
  }

  private beat(): void {
    for (const [key, group] of [...this.groups]) {
      for (const socket of [...group]) {
        if (!this.alive.get(socket)) {
          this.remove(key, socket);
          socket.terminate();
          continue;
        }
        this.alive.set(socket, false);
        socket.ping();
      }
    }
  }
}
