import type { MailCatcherStore } from '../../../channels/email/mail-catcher.js';
import { type EmailStores, EmailProviders } from '../../../channels/email/registry.js';
import type { Deps } from '../../../deps.js';
import { RenderPool } from '../../../rendering/render-pool.js';
import type { DomainsService } from '../../domains/domains.service.js';
import type { EngagementService } from '../../engagement/engagement.service.js';
import type { InappService } from '../../inapp/inapp.service.js';
import type { ApnSettingsService } from '../../push/apn-settings.service.js';
import type { FcmSettingsService } from '../../push/fcm.service.js';
import type { WebPushService } from '../../push/web-push.service.js';
import type { SlackSettingsService } from '../../slack/slack.service.js';
import type { NumbersService } from '../../telephony/numbers.service.js';
import type { TelephonyRepository } from '../../telephony/telephony.repository.js';
import type { UsersService } from '../../users/users.service.js';
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

/** The services the executors call (the process's services object has them all). */
export interface ExecutorServices {
  users: UsersService;
  inapp: InappService;
  numbers: NumbersService;
  webPush: WebPushService;
  apnSettings: ApnSettingsService;
  fcmSettings: FcmSettingsService;
  slackSettings: SlackSettingsService;
  engagement?: EngagementService;
  /** Sender domains: the From rule and DKIM keys; without it, mail is neither checked nor signed. */
  domains?: DomainsService;
  repositories: { telephony: TelephonyRepository; mailCatcher: MailCatcherStore; emailSettings: EmailStores['settings'] };
}

/**
 * Every channel this process can deliver; a channel without an executor is routed CHANNEL_UNAVAILABLE.
 * `renders`: the process's render threads (startWorkers shares the delivery worker's), for what
 * executors render at delivery; without it, executors get render threads of their own, closed by `close`.
 */
export function buildExecutors(deps: Deps, services: ExecutorServices, renders?: RenderPool): { executors: Executors; close: () => Promise<void> } {
  const { mailCatcher, emailSettings } = services.repositories;
  const pool = renders ?? new RenderPool();
  const emailProviders = new EmailProviders(deps, { caught: mailCatcher, settings: emailSettings });
  const candidates: [SendChannel, ManagedExecutor | null][] = [
    ['EMAIL', { ...emailExecutor(deps.config, emailProviders, services.engagement, services.domains), close: () => emailProviders.close() }],
    ['INAPP_WEB', inappExecutor(services.inapp, pool)],
    ['SMS', smsExecutor(deps, services)],
    ['CALL', callExecutor(deps, services)],
    ['PUSH', mobilePushExecutor(deps, services)],
    ['WEB_PUSH', webPushExecutor(deps, services)],
    ['SLACK', slackExecutor(deps, services)],
  ];
  const executors: Executors = {};
  for (const [channel, executor] of candidates) if (executor) executors[channel] = executor;
  return {
    executors,
    close: async () => {
      await Promise.all(Object.values(executors).map((e) => e?.close?.() ?? Promise.resolve()));
      if (!renders) await pool.close();
    },
  };
}
