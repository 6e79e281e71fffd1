import { publicBase, telephonyClient, telephonyEndpoint } from '../../channels/telephony/endpoint.js';
import { type FormParams, field, verifyTwilioSignature } from '../../channels/telephony/signature.js';
import { smsEncoding } from '../../channels/telephony/sms-content.js';
import { TwilioClient } from '../../channels/telephony/twilio-client.js';
import { readableTwilioCode } from '../../channels/telephony/twilio-errors.js';
import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import { UsersService } from '../users/users.service.js';
import type { Suppressions } from '../users/users.types.js';
import type { WebhookEventType } from '../webhooks/events.js';
import type { NewWebhookEvent, WebhookOutbox } from '../webhooks/outbox.js';
import { normalizePhoneNumber } from '../users/users.validation.js';
import { SmsOptOuts, inboundKeyword, keywordOf } from './sms-opt-outs.service.js';
import { TelephonyRepository } from './telephony.repository.js';

/**
 * Form parameters the development carrier adds to a text it simulates to the shared number (no
 * account's): the account and environment that simulated it, so it acts only there. Covered by
 * the carrier's X-Twilio-Signature like every other parameter.
 */
export const DEV_CARRIER_SCOPE = { accountId: 'ClarionAccountId', envId: 'ClarionEnvironmentId' } as const;

/** Whether a user's stored suppressions (JSON text) include SMS. */
function smsSuppressed(suppressions: string | null): boolean {
  if (!suppressions) return false;
  return (JSON.parse(suppressions) as Suppressions).SMS !== undefined;
}

const CALL_FAILURES: Record<string, string> = { busy: 'BUSY', 'no-answer': 'NO_ANSWER', failed: 'FAILED', canceled: 'CANCELED' };

/** "-0.01300" (Twilio prices are negative strings: money leaving the account) as a positive number. */
function priceOf(raw: string | null | undefined): number | undefined {
  if (raw === null || raw === undefined || raw === '') return undefined;
  const n = Math.abs(Number(raw));
  return Number.isFinite(n) ? n : undefined;
}

function e164(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    return normalizePhoneNumber(raw);
  } catch {
    return undefined;
  }
}

/**
 * What the carrier tells Clarion: message and call status callbacks, and inbound messages. Every
 * request is verified with X-Twilio-Signature over the URL it was sent to, as Twilio signs it.
 */
export class TelephonyCallbacks {
  constructor(
    private readonly deps: Deps,
    /** The process's users service (suppressions and STOP/START), shared with the routes. */
    private readonly users: UsersService,
    /** Where SMS_INBOUND, SMS_UNSUBSCRIBE and SMS_SUBSCRIBE are written, in the transaction that records them. */
    private readonly outbox: WebhookOutbox,
    private readonly repo: TelephonyRepository = new TelephonyRepository(deps.db),
    private readonly optOuts: SmsOptOuts = new SmsOptOuts(deps),
  ) {}

  /** A client for lookups made while answering a callback: short timeout, the carrier waits on us. */
  private lookupClient(): TwilioClient | null {
    const endpoint = telephonyEndpoint(this.deps);
    return endpoint ? new TwilioClient(endpoint, { timeoutMs: 3000 }) : null;
  }

  /** Throws 401 without a signature, 403 with a wrong one. `path` is the request URL path and query. */
  verify(path: string, signature: string | string[] | undefined, params: FormParams): void {
    const endpoint = telephonyEndpoint(this.deps);
    if (!endpoint) throw new AppError('NOT_FOUND', 'No telephony provider is configured on this server.');
    if (typeof signature !== 'string' || signature === '') {
      throw new AppError('UNAUTHORIZED', 'Missing X-Twilio-Signature header.', 'Only the configured carrier may call this route.');
    }
    const url = `${publicBase(this.deps.config)}${path}`;
    if (!verifyTwilioSignature(endpoint.authToken, signature, url, params)) {
      throw new AppError('FORBIDDEN', 'X-Twilio-Signature does not match this request.', `The signature must be made with the auth token over ${url.split('?')[0]} and the POST parameters; check CLARION_PUBLIC_URL.`);
    }
  }

  async smsStatus(params: FormParams): Promise<void> {
    const sid = field(params, 'MessageSid') ?? field(params, 'SmsSid');
    const status = (field(params, 'MessageStatus') ?? field(params, 'SmsStatus') ?? '').toLowerCase();
    if (!sid) throw new AppError('VALIDATION_FAILED', 'MessageSid is required.');
    if (status === 'delivered') {
      const price = await this.lookupClient()
        ?.fetchMessage(sid)
        .then((m) => priceOf(m.price))
        .catch(() => undefined);
      await this.deps.ledger.recordProviderStatus({
        channel: 'sms',
        providerMessageId: sid,
        status: 'delivered',
        ...(price !== undefined ? { extra: { sms_delivered_cost_internal: price } } : {}),
      });
    } else if (status === 'undelivered' || status === 'failed') {
      const errorCode = field(params, 'ErrorCode');
      await this.deps.ledger.recordProviderStatus({
        channel: 'sms',
        providerMessageId: sid,
        status: 'failed',
        code: readableTwilioCode(errorCode, status.toUpperCase()),
        internal: `carrier reported ${status}${errorCode ? ` with Twilio error ${errorCode}` : ''}`,
      });
    }
    // queued, sending, sent, accepted: progress only; sms_sent_* was recorded when the carrier took the message.
  }

  async callStatus(params: FormParams): Promise<void> {
    const sid = field(params, 'CallSid');
    const status = (field(params, 'CallStatus') ?? '').toLowerCase();
    if (!sid) throw new AppError('VALIDATION_FAILED', 'CallSid is required.');
    if (status === 'completed') {
      // Call price is not part of the callback: Twilio puts it on the Call resource.
      const call = await this.lookupClient()?.fetchCall(sid).catch(() => undefined);
      const duration = Number(field(params, 'CallDuration') ?? call?.duration ?? NaN);
      const cost = priceOf(call?.price);
      await this.deps.ledger.recordProviderStatus({
        channel: 'call',
        providerMessageId: sid,
        status: 'delivered',
        extra: {
          call_delivered_code: 'COMPLETED',
          ...(Number.isFinite(duration) ? { call_delivered_duration: duration } : {}),
          ...(cost !== undefined ? { call_delivered_cost: cost, call_delivered_cost_internal: cost } : {}),
        },
      });
    } else if (CALL_FAILURES[status]) {
      const errorCode = field(params, 'ErrorCode');
      await this.deps.ledger.recordProviderStatus({
        channel: 'call',
        providerMessageId: sid,
        status: 'failed',
        code: CALL_FAILURES[status],
        internal: `call ended ${status}${errorCode ? ` (Twilio error ${errorCode})` : ''}`,
      });
    }
  }

  /**
   * An SMS a user sent to one of our numbers, recorded in one transaction: the `sms_inbound_*`
   * fields on the log of the last send to them from that number (through the ledger), for
   * STOP/START the number's opt-out in that environment (SmsOptOuts) and the SMS suppression of
   * its users set or cleared, and the webhook events of both (SMS_INBOUND for every text,
   * SMS_UNSUBSCRIBE / SMS_SUBSCRIBE per user for STOP / START) through the outbox. Twilio's
   * OptOutType, when present, says which keyword it was (inboundKeyword). Without such a send
   * there is no environment to record anything in: the text is logged and dropped (the carrier
   * itself blocks the pair after a STOP). Otherwise the send's auto-reply goes out once, unless
   * the text was a keyword (the carrier answers those) or the number is suppressed or opted out
   * for SMS (decided in that transaction). Answers TwiML (empty: replies go through the REST
   * API, so they are logged).
   *
   * Which send: the last one from that number to the user, within the number's account. For the
   * shared number (CLARION_DEFAULT_SMS_FROM, no account's) that is the last send from it by any
   * account, which is all a carrier's text says. The development carrier's simulated texts name
   * the account and environment that simulated them (DEV_CARRIER_SCOPE), and act only there.
   */
  async inbound(params: FormParams): Promise<void> {
    const from = e164(field(params, 'From'));
    const to = e164(field(params, 'To'));
    const text = field(params, 'Body') ?? '';
    if (!from || !to) return;
    const simulated = this.simulatedScope(params);
    const owner = simulated ? undefined : await this.repo.findNumber(to);
    const last = await this.repo.lastSmsSend(from, to, simulated?.accountId ?? owner?.account_id, simulated?.envId);
    const keyword = keywordOf(text);
    const kind = inboundKeyword(text, field(params, 'OptOutType'));
    const optOut = kind === 'help' ? null : kind;
    if (!last) {
      // A number is the account's, but what a text belongs to is an environment: the one of the
      // last send to this user from this number. Without one there is no log, no user and no
      // webhook endpoint to give it to.
      this.deps.logger.info({ to, keyword: kind ? keyword : undefined }, 'inbound SMS from a number never sent to from this number; not recorded');
      return;
    }
    const now = this.deps.clock.now().toISOString();
    const messageSid = field(params, 'MessageSid') ?? field(params, 'SmsSid');
    const details = {
      sms_inbound_at: now,
      sms_inbound_from: from,
      sms_inbound_to: to,
      sms_inbound_text: text,
      ...(messageSid ? { sms_inbound_message_sid: messageSid } : {}),
      sms_sent_at: last.created_at,
    };
    const event = (type: WebhookEventType, userId: string, extra: Record<string, unknown> = {}): NewWebhookEvent => ({
      accountId: last.account_id,
      envId: last.env_id,
      type,
      payload: { channel: 'SMS', userId, notificationId: last.notification_id ?? '', trackingId: last.tracking_id, occurredAt: now, details: { ...details, ...extra } },
    });
    const replying = await this.deps.ledger.transaction(async (tx) => {
      await tx.mergeDeliveryDetails(last.delivery_id, { sms_inbound_at: now, sms_inbound_from: from, sms_inbound_text: text }, now);
      const repo = new TelephonyRepository(tx.db);
      const events = [event('SMS_INBOUND', last.user_id)];
      if (optOut) {
        // The number itself (routing skips it whoever carries it, later records included), and
        // every user of that environment with it, whose reads and suppressions show the STOP.
        const scope = { accountId: last.account_id, envId: last.env_id };
        if (optOut === 'stop') await this.optOuts.stop(scope, from, { keyword, to, messageSid: messageSid ?? null, at: now }, tx.db);
        else await this.optOuts.start(scope, from, tx.db);
        for (const user of await repo.usersWithNumber(last.account_id, last.env_id, from)) {
          if (optOut === 'stop') {
            await this.users.setSuppression(last.account_id, last.env_id, user.id, 'SMS', { reason: 'Unsubscribed', details: { keyword, from, to, messageSid: messageSid ?? null } }, tx.db);
            events.push(event('SMS_UNSUBSCRIBE', user.id, { keyword, sms_unsubscribed_at: now }));
          } else {
            await this.users.clearSuppression(last.account_id, last.env_id, user.id, 'SMS', tx.db);
            events.push(event('SMS_SUBSCRIBE', user.id, { keyword, sms_subscribed_at: now }));
          }
        }
      }
      await this.outbox.emit(tx.db, events);
      // A keyword (STOP, START, HELP) is answered by the carrier itself.
      if (kind || !last.auto_reply) return false;
      // Decided here, with the users' rows locked (PostgreSQL; SQLite runs one transaction at a
      // time): a STOP from this number recorded at the same moment either committed first and its
      // suppression is seen, or waits for this claim. No reply to a number that opted out.
      const recipients = await repo.smsRecipients(last.account_id, last.env_id, last.user_id, from, this.deps.storage.dialect === 'postgres');
      if (recipients.some((r) => smsSuppressed(r.suppressions))) return false;
      if ((await this.optOuts.optedOut(last.account_id, last.env_id, [from], tx.db)).size > 0) return false;
      return repo.claimAutoReply(last.delivery_id, now);
    });

    if (!replying || !last.auto_reply) return;
    const client = telephonyClient(this.deps);
    try {
      if (!client) throw new Error('no telephony provider');
      const reply = await client.sendMessage({ to: from, from: to, body: last.auto_reply });
      await this.repo.setReplyMessageId(last.delivery_id, reply.sid);
    } catch (err) {
      // Not sent: let the user's next message try again.
      await this.repo.releaseAutoReply(last.delivery_id);
      this.deps.logger.warn({ err, trackingId: last.tracking_id }, 'SMS auto-reply failed');
      return;
    }
    const { encoding, segments } = smsEncoding(last.auto_reply);
    await this.deps.ledger.mergeDeliveryDetails(
      last.delivery_id,
      { sms_replied_at: this.deps.clock.now().toISOString(), sms_replied_to: from, sms_replied_text: last.auto_reply, sms_replied_segments: segments, sms_replied_encoding: encoding },
      now,
    );
  }

  /**
   * The account and environment a development carrier's simulated text names (DEV_CARRIER_SCOPE):
   * read only when the development carrier is this server's carrier, whose signature covers them.
   */
  private simulatedScope(params: FormParams): { accountId: string; envId: string } | undefined {
    if (!telephonyEndpoint(this.deps)?.dev) return undefined;
    const accountId = field(params, DEV_CARRIER_SCOPE.accountId);
    const envId = field(params, DEV_CARRIER_SCOPE.envId);
    return accountId && envId ? { accountId, envId } : undefined;
  }
}
