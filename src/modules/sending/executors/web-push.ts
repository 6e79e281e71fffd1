import { createHash } from 'node:crypto';
import { WebPushSender, type WebPushOutcome, type WebPushSenderOptions, webPushPayload } from '../../../channels/push/web-push.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { WebPushService } from '../../push/web-push.service.js';
import type { UsersService } from '../../users/users.service.js';
import { pushLifetimeStart } from './push-lifetime-start.js';
import { type ManagedExecutor, str } from './types.js';

/** Web push to every browser subscription of the user; VAPID keys per environment. */
type WebPushExecutorServices = { users: UsersService; webPush: WebPushService };

export function webPushExecutor(deps: Deps, services: WebPushExecutorServices, overrides: Partial<WebPushSenderOptions> = {}): ManagedExecutor {
  const sender = new WebPushSender({
    now: () => deps.clock.now(),
    allowPrivateNetworks: deps.config.allowPrivateNetworks,
    ttlSeconds: deps.config.webPushTtlSeconds,
    urgency: deps.config.webPushUrgency,
    ...overrides,
  });
  return createWebPushExecutor(deps, services, sender);
}

type Failure = Extract<WebPushOutcome, { ok: false }>;

export function createWebPushExecutor(deps: Deps, services: WebPushExecutorServices, sender: WebPushSender): ManagedExecutor {
  const { users, webPush: keys } = services;
  return {
    fromInline: (body) => (body.web_push ? { title: body.web_push.title, message: body.web_push.message, icon: body.web_push.icon, url: body.web_push.url } : null),
    preview: (c) => str(c.title) ?? '',
    close: () => sender.close(),
    async deliver({ delivery, message, content }) {
      const user = await users.get(message.account_id, message.env_id, message.user_id);
      if (!user) throw new DeliveryError('USER_DELETED', 'the user was deleted before delivery', { retryable: false });
      const subscriptions = user.webPushTokens ?? [];
      if (subscriptions.length === 0) {
        throw new DeliveryError('NO_WEB_PUSH_SUBSCRIPTION', 'the user has no web push subscription left (gone ones are removed)', { retryable: false });
      }
      const vapid = await keys.credentials(message.account_id, message.env_id);
      const payload = webPushPayload({ title: str(content.title) ?? '', message: str(content.message) ?? '', icon: str(content.icon), url: str(content.url) });
      // The same topic on every attempt of this delivery: a resend after a crash replaces a copy still waiting at the push service.
      const topic = createHash('sha256').update(delivery.id).digest('base64url').slice(0, 32);
      // The TTL counts from the send: a retry gets what is left, or is not sent once it has run out (PUSH_EXPIRED).
      const lifetimeStart = pushLifetimeStart(delivery, message);
      const outcomes = await Promise.all(subscriptions.map((t) => sender.send(vapid, t.sub, payload, { topic, lifetimeStart })));

      const accepted = outcomes.filter((o): o is Extract<WebPushOutcome, { ok: true }> => o.ok);
      const failed = outcomes.filter((o): o is Failure => !o.ok);
      const gone = failed.filter((f) => f.kind === 'gone').map((f) => f.endpoint);
      if (gone.length > 0) {
        await users.removeWebPushSubscriptions(message.account_id, message.env_id, message.user_id, gone);
        deps.logger.info({ trackingId: message.tracking_id, userId: message.user_id, removed: gone.length }, 'web push subscriptions removed: the push service says they are gone');
      }
      const describe = (f: Failure) => `${f.endpoint}: ${f.reason}${f.kind === 'gone' ? ' (subscription removed)' : ''}`;

      if (accepted.length > 0) {
        const at = deps.clock.now().toISOString();
        return {
          result: {
            ...(accepted[0].location ? { providerMessageId: accepted[0].location } : {}),
            response: `${accepted.length} of ${outcomes.length} subscriptions accepted (${outcomes.map((o) => (o.ok ? o.status : o.status ?? o.code)).join(', ')})`,
            accepted: accepted.map((o) => o.endpoint),
            ...(failed.length ? { rejected: failed.map((f) => f.endpoint) } : {}),
          },
          extra: {
            web_push_sent_token: accepted.map((o) => o.endpoint).join(', '),
            ...(failed.length
              ? { web_push_failed_at: at, web_push_failed_token: failed.map((f) => f.endpoint).join(', '), web_push_failed_internal: failed.map(describe).join('; ').slice(0, 2000) }
              : {}),
          },
        };
      }

      const summary = failed.map(describe).join('; ');
      const retryable = failed.filter((f) => f.kind === 'retry');
      if (retryable.length > 0) {
        const waits = retryable.map((f) => f.retryAfterMs).filter((ms): ms is number => ms !== undefined);
        throw new DeliveryError(retryable[0].code, summary, {
          retryable: true,
          ...(retryable[0].status ? { providerCode: String(retryable[0].status) } : {}),
          ...(waits.length ? { retryAfterMs: Math.max(...waits) } : {}),
        });
      }
      const allGone = gone.length === failed.length;
      throw new DeliveryError(allGone ? 'SUBSCRIPTION_GONE' : failed[0].code, summary, {
        retryable: false,
        ...(failed[0].status ? { providerCode: String(failed[0].status) } : {}),
        recipient: failed.map((f) => f.endpoint).join(', '),
        recipientInvalid: allGone,
      });
    },
  };
}
