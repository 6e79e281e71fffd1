import type { Deps } from '../../deps.js';
import type { App } from '../../http/types.js';

/** Notification types, templates and email components (filled in by the templates module). */
export function templateRoutes(_app: App, _deps: Deps): void {}
