import { EmailProviders } from '../../../channels/email/registry.js';
import type { Deps } from '../../../deps.js';
import { InappService } from '../../inapp/inapp.service.js';
import { OutboxRepository } from '../../outbox/outbox.repository.js';
import type { SendChannel } from '../channels.js';
import { callExecutor } from './call.js';
import { emailExecutor } from './email.js';
import { inappExecutor } from './inapp.js';
import { mobilePushExecutor } from './mobile-push.js';
import { slackExecutor } from './slack.js';
import { smsExecutor } from './sms.js';
import type { Executors, ManagedExecutor } from './types.js';
import { webPushExecutor } from './web-push.js';

export type { Executors } from './types.js';

/** Every channel this process can deliver; a channel without an executor is routed CHANNEL_UNAVAILABLE. */
export function buildExecutors(deps: Deps): { executors: Executors; close(): Promise<void> } {
  const emailProviders = new EmailProviders(deps, new OutboxRepository(deps.db));
  const candidates: [SendChannel, ManagedExecutor | null][] = [
    ['EMAIL', { ...emailExecutor(deps.config, emailProviders), close: () => emailProviders.close() }],
    ['INAPP_WEB', inappExecutor(new InappService(deps))],
    ['SMS', smsExecutor(deps)],
    ['CALL', callExecutor(deps)],
    ['PUSH', mobilePushExecutor(deps)],
    ['WEB_PUSH', webPushExecutor(deps)],
    ['SLACK', slackExecutor(deps)],
  ];
  const executors: Executors = {};
  for (const [channel, executor] of candidates) if (executor) executors[channel] = executor;
  return {
    executors,
    async close() {
      await Promise.all(Object.values(executors).map((e) => e?.close?.()));
    },
  };
}
