import type { WebSocket } from 'ws';

export interface SocketHubOptions {
  /** How often every socket is pinged; a socket that has not answered the previous ping is dropped. */
  heartbeatMs?: number;
}

/**
 * Open websockets grouped by a key (e.g. environment + user), in this process. Sockets leave
 * their group when they close; dead peers (no pong within a heartbeat) are terminated.
 */
export class SocketHub {
  private readonly groups = new Map<string, Set<WebSocket>>();
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly heartbeatMs: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: SocketHubOptions = {}) {
    this.heartbeatMs = options.heartbeatMs ?? 30_000;
  }

  add(key: string, socket: WebSocket): void {
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = new Set()));
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

  /** Sends one text frame to every open socket of the group; returns how many it went to. */
  send(key: string, text: string): number {
    let sent = 0;
    for (const socket of this.groups.get(key) ?? []) {
      if (socket.readyState !== socket.OPEN) continue;
      socket.send(text);
      sent++;
    }
    return sent;
  }

  /** Closes every socket (1001 going away), e.g. on shutdown. */
  close(): void {
    for (const group of this.groups.values()) {
      for (const socket of group) socket.close(1001, 'server shutting down');
    }
    this.groups.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
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
