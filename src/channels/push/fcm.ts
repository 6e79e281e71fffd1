import type { Deps } from '../../deps.js';
import { DeliveryError } from '../types.js';
import type { MobilePushProvider } from './types.js';

/** FCM HTTP v1 provider (filled in by the FCM adapter). */
export function createFcmProvider(_deps: Deps): MobilePushProvider {
  return {
    async send() {
      throw new DeliveryError('NOT_CONFIGURED', 'FCM delivery is not implemented yet', { retryable: false });
    },
    async close() {},
  };
}
