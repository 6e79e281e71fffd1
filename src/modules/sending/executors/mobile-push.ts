import type { Deps } from '../../../deps.js';
import type { ManagedExecutor } from './types.js';

/** Not available yet: the routing records CHANNEL_UNAVAILABLE for this channel. */
export function mobilePushExecutor(_deps: Deps): ManagedExecutor | null {
  return null;
}
