import type { Deps } from '../../deps.js';
import type { App } from '../../http/types.js';

/** The local mail outbox (filled in by the email module). */
export function outboxRoutes(_app: App, _deps: Deps): void {}
