import fs from 'node:fs';
import { ApnsProvider } from '../../../channels/push/apns.js';
import { createFcmProvider } from '../../../channels/push/fcm.js';
import type { MobilePushMessage, MobilePushProvider, PushScope, PushSendResult, PushToken } from '../../../channels/push/types.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { ApnSettingsService } from '../../push/apn-settings.service.js';
import type { FcmSettingsService } from '../../push/fcm.service.js';
import type { UsersService } from '../../users/users.service.js';
import { pushLifetimeStart } from './push-lifetime-start.js';
import { type ManagedExecutor, str } from './types.js';

type TokenOutcome = { token: PushToken; result: PushSendResult } | { token: PushToken; error: DeliveryError };

/**
 * Mobile push (channel PUSH): one notification to every device token of the user, each through
 * APNs or FCM by its type. The delivery is sent when at least one device accepted it; a token
 * the provider calls invalid is removed from the user; when no device accepted it, the delivery
 * is retried if any failure was transient, and fails otherwise.
 */
export function mobilePushExecutor(
  deps: Deps,
  services: { users: UsersService; apnSettings: ApnSettingsService; fcmSettings: FcmSettingsService },
): ManagedExecutor | null {
  const { users, apnSettings, fcmSettings } = services;
  const caFile = deps.config.apnsCaFile;
  const providers: Record<PushToken['type'], MobilePushProvider> = {
    // Gateways from config, credentials per environment.
    APN: new ApnsProvider({
      productionUrl: deps.config.apnsProductionUrl,
      sandboxUrl: deps.config.apnsSandboxUrl,
      clock: deps.clock,
      credentials: (scope) => apnSettings.credentials(scope),
      ...(caFile ? { ca: fs.readFileSync(caFile, 'utf8') } : {}),
    }),
    FCM: createFcmProvider(deps, (scope) => fcmSettings.credentials(scope)),
  };

  async function sendOne(scope: PushScope, token: PushToken, push: MobilePushMessage): Promise<TokenOutcome> {
    const provider = providers[token.type];
    try {
      if (!provider) throw new DeliveryError('UNSUPPORTED_TOKEN_TYPE', `push token type ${String(token.type)} is neither APN nor FCM`, { retryable: false });
      return { token, result: await provider.send(scope, token, push) };
    } catch (err) {
      const error =
        err instanceof DeliveryError ? err : new DeliveryError('INTERNAL', err instanceof Error ? err.message : String(err), { retryable: true });
      return { token, error };
    }
  }

  return {
    fromInline: (body) => (body.mobile_push ? { title: body.mobile_push.title, message: body.mobile_push.message } : null),
    preview: (c) => str(c.title) || str(c.message) || '',
    async deliver({ delivery, message, content, body }) {
      const scope = { accountId: message.account_id, envId: message.env_id };
      const user = await users.get(message.account_id, message.env_id, message.user_id);
      const tokens = uniqueTokens(user?.pushTokens ?? []);
      if (tokens.length === 0) throw new DeliveryError('NO_PUSH_TOKENS', 'the user has no mobile push tokens', { retryable: false });

      const options = body.options ?? {};
      const push: MobilePushMessage = {
        title: str(content.title) ?? '',
        message: str(content.message) ?? '',
        ...(options.push?.customData ? { customData: options.push.customData } : {}),
        ...(options.apn ? { apn: options.apn } : {}),
        ...(options.fcm ? { fcm: options.fcm } : {}),
        dedupeKey: message.tracking_id,
        // A retry sends what is left of expiry/ttl, or nothing once it has run out (PUSH_EXPIRED).
        lifetimeStart: pushLifetimeStart(delivery, message),
      };
      const outcomes = await Promise.all(tokens.map((token) => sendOne(scope, token, push)));
      const sent = outcomes.filter((o): o is Extract<TokenOutcome, { result: PushSendResult }> => 'result' in o);
      const failed = outcomes.filter((o): o is Extract<TokenOutcome, { error: DeliveryError }> => 'error' in o);

      const invalid = failed.filter((f) => f.error.options.recipientInvalid).map((f) => f.token.token);
      if (invalid.length > 0) await users.removePushTokens(message.account_id, message.env_id, message.user_id, invalid);
      const moved = new Map(sent.flatMap((s) => (s.result.tokenEnvironment ? [[s.token.token, s.result.tokenEnvironment] as const] : [])));
      // The push went out: a failure to file the token anew only costs the next push a second request.
      await users.setPushTokenEnvironments(message.account_id, message.env_id, message.user_id, moved).catch((err: unknown) => {
        deps.logger.warn({ err, trackingId: message.tracking_id }, 'mobile push: could not store the environment APNs accepted a token in');
      });

      const failedFields =
        failed.length > 0
          ? {
              mobile_push_failed_token: failed.map((f) => f.token.token).join(', '),
              mobile_push_failed_code: failed.map((f) => f.error.code).join(', '),
              mobile_push_failed_internal: failed.map((f) => `${f.token.type} ${f.token.token}: ${f.error.message}`).join('; ').slice(0, 1000),
            }
          : {};
      if (sent.length > 0) {
        return {
          result: {
            providerMessageId: sent[0].result.providerMessageId,
            response: sent.map((s) => `${s.token.type} ${s.result.response ?? 'accepted'}`).join('; '),
            accepted: sent.map((s) => s.token.token),
            ...(failed.length ? { rejected: failed.map((f) => f.token.token) } : {}),
          },
          extra: { mobile_push_sent_token: sent.map((s) => s.token.token).join(', '), ...failedFields },
        };
      }

      const summary = failed.map((f) => `${f.token.type} ${f.token.token}: ${f.error.code} (${f.error.message})`).join('; ');
      const transient = failed.find((f) => f.error.retryable);
      // Tokens found invalid are gone from the user by now, so a retry only reaches the others.
      const first = transient ?? failed[0];
      throw new DeliveryError(first.error.code, summary, {
        retryable: Boolean(transient),
        providerCode: first.error.options.providerCode,
        retryAfterMs: transient?.error.options.retryAfterMs,
        recipient: failed.map((f) => f.token.token).join(', '),
        recipientInvalid: invalid.length === failed.length,
      });
    },
    async close() {
      await Promise.all(Object.values(providers).map((p) => p.close()));
    },
  };
}

function uniqueTokens(tokens: PushToken[]): PushToken[] {
  const seen = new Set<string>();
  return tokens.filter((t) => {
    const key = `${t.type}\n${t.token}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
