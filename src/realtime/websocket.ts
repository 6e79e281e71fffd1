import websocketPlugin from '@fastify/websocket';
import type { App } from '../http/types.js';
import { CLOSE_GOING_AWAY, SHUTDOWN_CLOSE_GRACE_MS, SHUTTING_DOWN_REASON, closeWithin } from './hub.js';

export interface WebsocketSupportOptions {
  /** How long a socket has at shutdown to answer its close frame before it is terminated (default SHUTDOWN_CLOSE_GRACE_MS). */
  shutdownGraceMs?: number;
}

/**
 * Registers @fastify/websocket once per application. It listens to the server's `upgrade`
 * event, so a second registration would route every upgrade twice: modules that serve
 * websockets call this instead of registering the plugin themselves (the first call's options
 * apply).
 */
export async function ensureWebsocketSupport(app: App, options: WebsocketSupportOptions = {}): Promise<void> {
  if (app.hasDecorator('websocketServer')) return;
  const graceMs = options.shutdownGraceMs ?? SHUTDOWN_CLOSE_GRACE_MS;
  await app.register(websocketPlugin, {
    options: { maxPayload: 64 * 1024 },
    // The plugin's default preClose closes every socket without a status (clients see 1005), and
    // runs before the app's onClose hooks, so theirs comes too late to set the code; it also
    // leaves a peer that never answers to ws's 30 s close timeout, which holds app.close().
    preClose: async () => {
      const server = app.websocketServer;
      // Upgrades still being authenticated are refused (503) rather than opened after this.
      server.close();
      await closeWithin(server.clients, CLOSE_GOING_AWAY, SHUTTING_DOWN_REASON, graceMs);
    },
    // The plugin's default logs every socket error at error level with its stack. A bad frame
    // (unmasked, reserved opcode or bit, invalid UTF-8, over maxPayload) is the client's doing and
    // anyone may open a socket: at debug, without a stack, it cannot flood the error log.
    errorHandler: (error, socket, request) => {
      const wsCode = (error as { code?: unknown }).code;
      if (typeof wsCode === 'string' && wsCode.startsWith('WS_ERR_')) {
        request.log.debug({ wsCode, wsError: error.message }, 'websocket closed: the client sent a frame it may not');
      } else {
        request.log.error({ err: error }, 'websocket handler failed');
      }
      // ws has sent the close frame with its code (1002, 1007, 1009) and reads nothing more, so
      // the client's answer would never be seen: waiting for it would hold the socket 30 s.
      socket.terminate();
    },
  });
}
