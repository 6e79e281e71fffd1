import type { Deps } from '../../deps.js';
import type { App } from '../../http/types.js';

/** Registered in app.ts; filled in by its channel module. */
export async function fcmRoutes(_app: App, _deps: Deps): Promise<void> {}
