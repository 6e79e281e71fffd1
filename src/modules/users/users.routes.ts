import type { Deps } from '../../deps.js';
import type { App } from '../../http/types.js';

export function userRoutes(_app: App, _deps: Deps): void {
  // filled in by the users module
}
