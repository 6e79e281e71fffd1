import type { EmailTracking } from '../../channels/types.js';
import { publicBase } from '../../channels/telephony/endpoint.js';
import type { Deps } from '../../deps.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { EnvironmentsRepository } from '../environments/environments.repository.js';
import type { PreferencesService } from '../preferences/preferences.service.js';
import type { WebhookOutbox } from '../webhooks/outbox.js';
import { EngagementTokens, type UnsubscribeToken } from './tokens.js';
import type { TrackingSettingsRepository } from './tracking-settings.repository.js';

/** An environment's tracking switches (GET/PUT /settings/email/tracking); both on by default. */
export interface TrackingSetting {
  opens: boolean;
  clicks: boolean;
}

/** Who engaged: the request's user agent and address, as the log records them. */
export interface EngagementClient {
  userAgent?: string;
  ip?: string;
}

/**
 * How the user unsubscribed: their mail client's RFC 8058 POST, the button of the confirmation
 * page, or mail to the List-Unsubscribe mailto address (received by the inbound SMTP server).
 */
export type UnsubscribeMethod = 'one-click' | 'page' | 'mail';

/** What the email executor adds to one delivery's mail. */
export interface EmailDecoration {
  headers: Record<string, string>;
  tracking?: EmailTracking;
}

/** The local part of List-Unsubscribe mailto addresses before the token. */
const MAIL_PREFIX = 'unsubscribe+';

/** The public routes of the tokens (engagement.routes.ts). */
export const ENGAGEMENT_PATHS = {
  open: '/e/open/:token',
  click: '/e/click/:token',
  unsubscribe: '/unsubscribe/:token',
} as const;

/**
 * Email engagement: open and click tracking (a pixel and tracked links with signed tokens,
 * recorded through the delivery ledger with their webhook event in the same transaction) and the
 * one-click unsubscribe (RFC 8058), which turns the notification type's email off for the user
 * (user_preferences) and emits EMAIL_UNSUBSCRIBE.
 */
export class EngagementService {
  readonly tokens: EngagementTokens;
  private readonly base: string;
  /**
   * The domain of unsubscribe+TOKEN@ addresses: CLARION_INBOUND_DOMAIN, the one the inbound SMTP
   * server receives for (its MX points at this server), so the mailto reaches unsubscribeByMail.
   */
  private readonly mailDomain: string;

  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock' | 'db' | 'secrets' | 'ledger'>,
    private readonly settings: TrackingSettingsRepository,
    private readonly outbox: WebhookOutbox,
    private readonly preferences: PreferencesService,
  ) {
    this.tokens = new EngagementTokens(deps.secrets.engagementKey);
    this.base = publicBase(deps.config).replace(/\/+$/, '');
    this.mailDomain = deps.config.inboundDomain.toLowerCase();
  }

  // --- settings ---------------------------------------------------------------------------

  async getTrackingSetting(scope: EnvScope): Promise<TrackingSetting> {
    const row = await this.settings.find(scope);
    return row ? { opens: row.track_opens === 1, clicks: row.track_clicks === 1 } : { opens: true, clicks: true };
  }

  async putTrackingSetting(scope: EnvScope, setting: Partial<TrackingSetting>): Promise<TrackingSetting> {
    const current = await this.getTrackingSetting(scope);
    const next = { opens: setting.opens ?? current.opens, clicks: setting.clicks ?? current.clicks };
    const now = this.deps.clock.now().toISOString();
    await this.settings.upsert({ env_id: scope.envId, account_id: scope.accountId, track_opens: next.opens ? 1 : 0, track_clicks: next.clicks ? 1 : 0, created_at: now, updated_at: now });
    return next;
  }

  // --- composition ------------------------------------------------------------------------

  /**
   * The List-Unsubscribe headers of one delivery's mail and, as the environment's switches say,
   * its tracking. `setting`: the environment's switches, read once per batch by the caller.
   */
  emailDecoration(
    delivery: { id: string; tracking_id: string; account_id: string; env_id: string },
    message: { user_id: string; notification_id: string },
    setting: TrackingSetting,
  ): EmailDecoration {
    const unsubscribe = this.tokens.sign({
      kind: 'unsubscribe',
      accountId: delivery.account_id,
      envId: delivery.env_id,
      userId: message.user_id,
      notificationId: message.notification_id,
      trackingId: delivery.tracking_id,
    });
    const mailto = this.unsubscribeAddress(delivery.id);
    const headers = {
      // RFC 2369 and RFC 8058: the https URL takes the one-click POST; the mailto is the fallback.
      'List-Unsubscribe': `<${this.url(ENGAGEMENT_PATHS.unsubscribe, unsubscribe)}>${mailto ? `, <mailto:${mailto}>` : ''}`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    };
    if (!setting.opens && !setting.clicks) return { headers };
    const envId = delivery.env_id;
    return {
      headers,
      tracking: {
        ...(setting.opens ? { pixelUrl: this.url(ENGAGEMENT_PATHS.open, this.tokens.sign({ kind: 'open', envId, deliveryId: delivery.id })) } : {}),
        ...(setting.clicks
          ? { link: (url: string, tags: Record<string, string[]> | undefined) => this.url(ENGAGEMENT_PATHS.click, this.tokens.sign({ kind: 'click', envId, deliveryId: delivery.id, url, ...(tags ? { tags } : {}) })) }
          : {}),
      },
    };
  }

  /** The List-Unsubscribe mailto address of a delivery (54-character local part), or null. */
  unsubscribeAddress(deliveryId: string): string | null {
    const token = this.tokens.mailToken(deliveryId);
    return token ? `${MAIL_PREFIX}${token}@${this.mailDomain}` : null;
  }

  private url(path: string, token: string): string {
    return this.base + path.replace(':token', token);
  }

  // --- opens and clicks -------------------------------------------------------------------

  /**
   * Records an open of the pixel's email. Null: the token is not valid; false: valid, but no sent
   * email of it is left in its environment (log retention), so nothing was recorded.
   */
  async open(raw: string, client: EngagementClient): Promise<boolean | null> {
    const token = this.tokens.verify(raw, 'open');
    if (!token) return null;
    const at = this.deps.clock.now().toISOString();
    const done = await this.deps.ledger.recordEngagement(token.deliveryId, token.envId, { kind: 'open', at, ...client }, (trx, d) =>
      this.outbox.emit(trx, [
        {
          accountId: d.account_id,
          envId: d.env_id,
          type: 'EMAIL_OPEN',
          payload: { channel: 'EMAIL', userId: d.user_id, notificationId: d.notification_id, trackingId: d.tracking_id, occurredAt: at, details: { ...details('email_opened', at, client), ...ordinal(d.extra, 'email_opened') } },
        },
      ]),
    );
    return done !== undefined;
  }

  /** Records a click and answers the link it leads to; null for a token that is not valid. */
  async click(raw: string, client: EngagementClient): Promise<string | null> {
    const token = this.tokens.verify(raw, 'click');
    if (!token) return null;
    const at = this.deps.clock.now().toISOString();
    await this.deps.ledger.recordEngagement(token.deliveryId, token.envId, { kind: 'click', at, ...client, link: token.url, ...(token.tags ? { tags: token.tags } : {}) }, (trx, d) =>
      this.outbox.emit(trx, [
        {
          accountId: d.account_id,
          envId: d.env_id,
          type: 'EMAIL_CLICK',
          payload: {
            channel: 'EMAIL',
            userId: d.user_id,
            notificationId: d.notification_id,
            trackingId: d.tracking_id,
            clickedLink: token.url,
            ...(token.tags ? { clickedLinkTags: token.tags } : {}),
            occurredAt: at,
            details: { ...details('email_clicked', at, client), email_clicked_link: token.url, ...ordinal(d.extra, 'email_clicked') },
          },
        },
      ]),
    );
    // A valid token always leads on, even once its log is gone (retention): the reader clicked a real link.
    return token.url;
  }

  // --- unsubscribe ------------------------------------------------------------------------

  /** The unsubscribe token's content, or null when it is not valid. */
  unsubscribeTarget(raw: string): UnsubscribeToken | null {
    return this.tokens.verify(raw, 'unsubscribe');
  }

  /**
   * What mail to a List-Unsubscribe mailto address unsubscribes from: null when `address` is not
   * `unsubscribe+<token>@CLARION_INBOUND_DOMAIN` (any case) with a token of this server, or its
   * email delivery is gone (log retention): the inbound SMTP server refuses those at RCPT.
   */
  async mailUnsubscribeTarget(address: string): Promise<UnsubscribeToken | null> {
    const lower = address.trim().toLowerCase();
    const at = lower.lastIndexOf('@');
    if (at < 0 || lower.slice(at + 1) !== this.mailDomain || !lower.startsWith(MAIL_PREFIX)) return null;
    const deliveryId = this.tokens.verifyMailToken(lower.slice(MAIL_PREFIX.length, at));
    const delivery = deliveryId ? await this.deps.ledger.findEngagedDelivery(deliveryId) : undefined;
    if (!delivery || delivery.channel !== 'email') return null;
    return { kind: 'unsubscribe', accountId: delivery.account_id, envId: delivery.env_id, userId: delivery.user_id, notificationId: delivery.notification_id, trackingId: delivery.tracking_id };
  }

  /** unsubscribe() for mail received at a List-Unsubscribe mailto address (a target from mailUnsubscribeTarget). */
  unsubscribeByMail(target: UnsubscribeToken, client: EngagementClient): Promise<boolean> {
    return this.applyUnsubscribe(target, client, 'mail');
  }

  /**
   * Turns the token's notification type's email off for its user and emits EMAIL_UNSUBSCRIBE
   * (once: a repeated POST, which mail clients do, changes and emits nothing). False: the token
   * is not valid or its environment is gone.
   */
  async unsubscribe(raw: string, client: EngagementClient, method: UnsubscribeMethod): Promise<boolean> {
    const token = this.unsubscribeTarget(raw);
    return token ? this.applyUnsubscribe(token, client, method) : false;
  }

  /** The one write path of every unsubscribe (one-click, page, mail). */
  private async applyUnsubscribe(token: UnsubscribeToken, client: EngagementClient, method: UnsubscribeMethod): Promise<boolean> {
    const env = await new EnvironmentsRepository(this.deps.db).find(token.accountId, token.envId);
    if (!env) return false;
    const at = this.deps.clock.now().toISOString();
    await this.deps.ledger.transaction(async (tx) => {
      // The one writer of preferences: it emits EMAIL_UNSUBSCRIBE with the write, once (a repeated POST changes nothing).
      const changed = await this.preferences.unsubscribe(
        { accountId: token.accountId, envId: token.envId },
        token.userId,
        token.notificationId,
        'EMAIL',
        {
          trackingId: token.trackingId,
          details: { email_unsubscribed_at: at, method, ...(client.userAgent ? { user_agent: client.userAgent } : {}), ...(client.ip ? { ip: client.ip } : {}) },
        },
        tx.db,
      );
      // On the log of the email it came from, while that log is kept (the ledger writes it).
      if (changed) await tx.mergeChannelDetails(token.trackingId, token.envId, 'email', { email_unsubscribed_at: at, email_unsubscribed_method: method }, at);
    });
    return true;
  }
}

/** `first`: whether this was the delivery's first open (click); `count`: how many so far, this one included. */
function ordinal(extra: string | null, prefix: string): { first: boolean; count: number } {
  const count = Number((extra ? (JSON.parse(extra) as Record<string, unknown>) : {})[`${prefix}_count`] ?? 1);
  return { first: count === 1, count };
}

function details(prefix: string, at: string, client: EngagementClient): Record<string, unknown> {
  return { [`${prefix}_at`]: at, ...(client.userAgent ? { [`${prefix}_user_agent`]: client.userAgent } : {}), ...(client.ip ? { [`${prefix}_ip`]: client.ip } : {}) };
}
