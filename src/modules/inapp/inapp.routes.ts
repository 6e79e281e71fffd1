import type { Deps } from '../../deps.js';
import type { App } from '../../http/types.js';

/** In-app notifications and their websocket (filled in by the in-app module). */
export async function inappRoutes(_app: App, _deps: Deps): Promise<void> {}
