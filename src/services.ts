import { telephonyEndpoint } from './channels/telephony/endpoint.js';
import type { Deps } from './deps.js';
import { DevCarrier } from './local-providers/dev-carrier/dev-carrier.js';
import { MailCatcherRepository } from './local-providers/mail-catcher/mail-catcher.repository.js';
import { MailCatcherService } from './local-providers/mail-catcher/mail-catcher.service.js';
import { AddressesRepository } from './modules/addresses/addresses.repository.js';
import { AddressesService } from './modules/addresses/addresses.service.js';
import { InboundMailService } from './modules/addresses/inbound.service.js';
import { AccountsRepository } from './modules/accounts/accounts.repository.js';
import { AccountsService } from './modules/accounts/accounts.service.js';
import { AuthService } from './modules/auth/auth.service.js';
import { type Broadcasts, buildBroadcasts } from './modules/broadcasts/broadcasts.module.js';
import { ComponentsService } from './modules/components/components.service.js';
import { DigestsService } from './modules/digests/digests.service.js';
import { DnsRecordChecker } from './modules/domains/dns-records.js';
import { DomainsRepository } from './modules/domains/domains.repository.js';
import { DomainsService } from './modules/domains/domains.service.js';
import { EmailSettingsRepository } from './modules/email/email-settings.repository.js';
import { EmailSettingsService } from './modules/email/email-settings.service.js';
import { EngagementService } from './modules/engagement/engagement.service.js';
import { TrackingSettingsRepository } from './modules/engagement/tracking-settings.repository.js';
import { EnvironmentsRepository } from './modules/environments/environments.repository.js';
import { EnvironmentsService } from './modules/environments/environments.service.js';
import { InappAuthenticator } from './modules/inapp/inapp.auth.js';
import { InappService } from './modules/inapp/inapp.service.js';
import { KeysRepository } from './modules/keys/keys.repository.js';
import { KeysService } from './modules/keys/keys.service.js';
import { LogsService } from './modules/logs/logs.service.js';
import { PreferencesService } from './modules/preferences/preferences.service.js';
import { SubNotificationsService } from './modules/preferences/sub-notifications.service.js';
import { ApnSettingsService } from './modules/push/apn-settings.service.js';
import { FcmSettingsService } from './modules/push/fcm.service.js';
import { WebPushService } from './modules/push/web-push.service.js';
import { SendIntake } from './modules/sending/intake.js';
import { RetractService } from './modules/sending/retract.service.js';
import { SendingService } from './modules/sending/sending.service.js';
import { SlackDirectoryService } from './modules/slack/slack-directory.service.js';
import { SlackOauthService } from './modules/slack/slack-oauth.service.js';
import { SlackSettingsService } from './modules/slack/slack.service.js';
import { TelephonyCallbacks } from './modules/telephony/callbacks.service.js';
import { NumbersService } from './modules/telephony/numbers.service.js';
import { TelephonyRepository } from './modules/telephony/telephony.repository.js';
import { TemplatesService } from './modules/templates/templates.service.js';
import { TypesService } from './modules/types/types.service.js';
import { UsersService } from './modules/users/users.service.js';
import { WebhooksService } from './modules/webhooks/webhooks.service.js';
import { LiquidRenderer } from './rendering/liquid.js';

/** Repositories more than one service (or a worker) reads through, built once over `deps.db`. */
export interface Repositories {
  accounts: AccountsRepository;
  environments: EnvironmentsRepository;
  keys: KeysRepository;
  telephony: TelephonyRepository;
  emailSettings: EmailSettingsRepository;
  mailCatcher: MailCatcherRepository;
}

/**
 * Every service of this process, built once by the composition root (buildServices) and handed
 * to routes (app.ts), workers and jobs (workers.ts): none of them constructs a service. Services
 * that keep process state (AuthService's key cache, WebPushService's VAPID keys, SendingService's
 * intake and type cache, DevCarrier's callbacks in flight) thereby have one instance per process.
 */
export interface Services {
  repositories: Repositories;
  /** Checks the Liquid of stored templates and components (one parse cache; sends render on threads of their own). */
  renderer: LiquidRenderer;
  auth: AuthService;
  accounts: AccountsService;
  environments: EnvironmentsService;
  keys: KeysService;
  users: UsersService;
  types: TypesService;
  templates: TemplatesService;
  components: ComponentsService;
  inapp: InappService;
  inappAuth: InappAuthenticator;
  webPush: WebPushService;
  apnSettings: ApnSettingsService;
  fcmSettings: FcmSettingsService;
  slackSettings: SlackSettingsService;
  /** A user's Slack workspace, listed for the in-app client's slack.getChannels. */
  slackDirectory: SlackDirectoryService;
  /** Users' Slack installs (OAuth v2) with the environment's Slack app. */
  slackOauth: SlackOauthService;
  emailSettings: EmailSettingsService;
  numbers: NumbersService;
  telephonyCallbacks: TelephonyCallbacks;
  sending: SendingService;
  /** Retract: takes back a user's sends of a type (modules/sending, through the ledger). Digests add their RetractStep here. */
  retract: RetractService;
  logs: LogsService;
  /** Webhook endpoints and this process's webhook worker (started with the other workers). */
  webhooks: WebhooksService;
  /** User preferences per type, sub-notification and channel: their one writer (modules/preferences). */
  preferences: PreferencesService;
  /** Sub-notifications of types with their titles (modules/preferences). */
  subNotifications: SubNotificationsService;
  /** Open and click tracking, one-click unsubscribe (modules/engagement). */
  engagement: EngagementService;
  /** Digests: collected in routing, sent by their periodic job (modules/digests). */
  digests: DigestsService;
  /** Sender domains of accounts (DomainsApi): DKIM keys, DNS verification, the fromAddress rule. */
  domains: DomainsService;
  /** Email broadcasts (modules/broadcasts): drafts, the state table, audiences, their jobs' work. */
  broadcasts: Broadcasts;
  /** Inbound email addresses (AddressesApi). */
  addresses: AddressesService;
  /** Inbound mail: parses, links and records what the inbound SMTP server accepts. */
  inbound: InboundMailService;
  /** Local stand-ins for providers (src/local-providers). */
  mailCatcher: MailCatcherService;
  /** The development carrier; null when Twilio credentials are configured (no /dev-carrier routes). */
  devCarrier: DevCarrier | null;
}

export function buildRepositories(deps: Pick<Deps, 'db'>): Repositories {
  return {
    accounts: new AccountsRepository(deps.db),
    environments: new EnvironmentsRepository(deps.db),
    keys: new KeysRepository(deps.db),
    telephony: new TelephonyRepository(deps.db),
    emailSettings: new EmailSettingsRepository(deps.db),
    mailCatcher: new MailCatcherRepository(deps.db),
  };
}

/** Builds every service once over `deps`; the API and the workers of one process share the result. */
export function buildServices(deps: Deps): Services {
  const repositories = buildRepositories(deps);
  const renderer = new LiquidRenderer();
  const auth = new AuthService(deps, repositories);
  const numbers = new NumbersService(deps, repositories.telephony);
  const users = new UsersService(deps);
  const webhooks = new WebhooksService(deps);
  const addressesRepo = new AddressesRepository(deps.db);
  const domains = new DomainsService(deps, new DomainsRepository(deps.db), new DnsRecordChecker({ server: deps.config.dnsServer }));
  const preferences = new PreferencesService(deps, webhooks.outbox);
  const engagement = new EngagementService(deps, new TrackingSettingsRepository(deps.db), webhooks.outbox, preferences);
  const slackSettings = new SlackSettingsService(deps);
  const sending = new SendingService(deps, deps.queue, domains, numbers);
  return {
    repositories,
    renderer,
    auth,
    accounts: new AccountsService(deps, repositories.accounts),
    environments: new EnvironmentsService(deps, repositories.environments),
    keys: new KeysService(deps, repositories, auth.apiKeys),
    users,
    types: new TypesService(deps),
    templates: new TemplatesService(deps, renderer),
    components: new ComponentsService(deps, renderer),
    inapp: new InappService(deps),
    inappAuth: new InappAuthenticator(deps, repositories.environments),
    webPush: new WebPushService(deps),
    apnSettings: new ApnSettingsService(deps),
    fcmSettings: new FcmSettingsService(deps),
    slackSettings,
    slackDirectory: new SlackDirectoryService(deps, users, slackSettings),
    slackOauth: new SlackOauthService(deps, users),
    emailSettings: new EmailSettingsService(deps, repositories.emailSettings),
    numbers,
    telephonyCallbacks: new TelephonyCallbacks(deps, users, webhooks.outbox, repositories.telephony),
    sending,
    retract: new RetractService(deps),
    logs: new LogsService(deps, deps.queue),
    webhooks,
    preferences,
    subNotifications: new SubNotificationsService(deps),
    engagement,
    // Its own intake: a digest's message is accepted inside the transaction that claims it.
    digests: new DigestsService(deps, new SendIntake(deps, deps.queue)),
    domains,
    // Its own intake too: a broadcast's page is accepted inside the transaction that hands it over.
    broadcasts: buildBroadcasts(deps, domains, sending, new SendIntake(deps, deps.queue), renderer),
    addresses: new AddressesService(deps, addressesRepo, domains),
    inbound: new InboundMailService(deps, addressesRepo, webhooks.outbox, engagement, domains),
    mailCatcher: new MailCatcherService(repositories.mailCatcher),
    devCarrier: telephonyEndpoint(deps)?.dev ? new DevCarrier(deps, numbers, repositories.telephony) : null,
  };
}
