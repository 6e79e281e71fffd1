import websocketPlugin from '@fastify/websocket';
import type { App } from '../http/types.js';

/**
 * Registers @fastify/websocket once per application. It listens to the server's `upgrade`
 * event, so a second registration would route every upgrade twice: modules that serve
 * websockets call this instead of registering the plugin themselves.
 */
export async function ensureWebsocketSupport(app: App): Promise<void> {
  if (app.hasDecorator('websocketServer')) return;
  await app.register(websocketPlugin, { options: { maxPayload: 64 * 1024 } });
}
