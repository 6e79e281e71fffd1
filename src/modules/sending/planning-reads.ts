import type { Deps } from '../../deps.js';
import { paddedToPowerOfTwo } from '../../storage/statement-shapes.js';
import type { ComponentResolver } from '../../rendering/liquid.js';
import { componentResolver } from '../components/components.service.js';
import { type EnvironmentRow, EnvironmentsRepository } from '../environments/environments.repository.js';
import { DigestsRepository } from '../digests/digests.repository.js';
import type { DigestRow } from '../digests/digests.tables.js';
import { PreferenceBook } from '../preferences/preferences.service.js';
import { SmsOptOutsRepository } from '../telephony/sms-opt-outs.repository.js';
import type { PreferenceDelivery } from '../preferences/preferences.tables.js';
import { TemplatesRepository } from '../templates/templates.repository.js';
import type { ResolvedTemplate, TemplatesService } from '../templates/templates.service.js';
import type { DigestOption } from '../types/delivery-options.js';
import { type NotificationType, ensureType } from '../types/types.service.js';
import type { UsersService } from '../users/users.service.js';
import type { Suppressions, User } from '../users/users.types.js';
import type { SendChannel } from './channels.js';
import { MessagesRepository } from './messages.repository.js';
import type { MessageRow } from './sending.tables.js';

/**
 * What planning a batch of messages reads, read once per batch: the messages and their users in
 * one query each (per environment), and per environment or notification type its environment,
 * type, templated channels, templates and components, however many messages share them. Reads
 * are started on first use and shared as promises, so a batch of one type costs one of each.
 */
export class PlanningReads {
  private readonly messages = new Map<string, MessageRow>();
  private readonly users = new Map<string, { user: User; suppressions: Suppressions }>();
  private readonly shared = new Map<string, Promise<unknown>>();
  /** The batch's user preferences, per environment. */
  private readonly preferences = new Map<string, PreferenceBook>();
  /** The batch's numbers that texted STOP, per environment. */
  private readonly optedOut = new Map<string, Set<string>>();

  private constructor(
    private readonly deps: Deps,
    private readonly templates: TemplatesService,
  ) {}

  /** Reads the batch's messages and their recipients. */
  static async of(deps: Deps, users: UsersService, templates: TemplatesService, trackingIds: string[]): Promise<PlanningReads> {
    const reads = new PlanningReads(deps, templates);
    const messages = await new MessagesRepository(deps.db).messagesForWork(trackingIds);
    const byEnv = new Map<string, MessageRow[]>();
    for (const message of messages) {
      reads.messages.set(message.tracking_id, message);
      const key = envKey(message);
      byEnv.set(key, [...(byEnv.get(key) ?? []), message]);
    }
    for (const group of byEnv.values()) {
      const { account_id: accountId, env_id: envId } = group[0];
      // IN lists padded to a few lengths, each statement compiled once (statement-shapes.ts).
      const found = await users.getManyWithSuppressions(accountId, envId, paddedToPowerOfTwo([...new Set(group.map((m) => m.user_id))]));
      for (const [userId, user] of found) reads.users.set(`${accountId}\u0000${envId}\u0000${userId}`, user);
      // One query per environment for the batch's (user, type) pairs; most batches find none.
      const book = await PreferenceBook.read(deps.db, { accountId, envId }, paddedToPowerOfTwo([...found.keys()]), paddedToPowerOfTwo([...new Set(group.map((m) => m.notification_id))]));
      reads.preferences.set(`${accountId}\u0000${envId}`, book);
      const numbers = new Set(group.map((m) => smsNumberOf(m, found.get(m.user_id)?.user)).filter((n) => n !== undefined));
      if (numbers.size > 0) reads.optedOut.set(`${accountId}\u0000${envId}`, new Set(await new SmsOptOutsRepository(deps.db).optedOut(accountId, envId, paddedToPowerOfTwo([...numbers]))));
    }
    return reads;
  }

  message(trackingId: string): MessageRow | undefined {
    return this.messages.get(trackingId);
  }

  /** The message's recipient with their suppressions; undefined when the user was deleted. */
  user(message: MessageRow): { user: User; suppressions: Suppressions } | undefined {
    return this.users.get(`${message.account_id}\u0000${message.env_id}\u0000${message.user_id}`);
  }

  /** Whether the number the message's SMS would go to opted out (STOP) in its environment. */
  smsOptedOut(message: MessageRow): boolean {
    const number = smsNumberOf(message, this.user(message)?.user);
    return number !== undefined && (this.optedOut.get(envKey(message))?.has(number) ?? false);
  }

  /**
   * The log channels off for the message: by the recipient's preferences (sub-notification over
   * type) and, where they picked nothing, by the type's default delivery option.
   */
  channelsOff(message: MessageRow, type: Pick<NotificationType, 'notificationId' | 'options'>): { byUser: ReadonlySet<string>; byDefault: ReadonlySet<string> } {
    const book = this.preferences.get(envKey(message));
    return book ? book.channelsOff(message.user_id, type, message.sub_notification_id) : { byUser: NONE, byDefault: NONE };
  }

  /** The delivery option of one channel of the message (PreferenceBook.resolve); explicit: the user's own choice. */
  deliveryOf(message: MessageRow, type: Pick<NotificationType, 'notificationId' | 'options'>, channel: SendChannel): { delivery: PreferenceDelivery; explicit: boolean } {
    const book = this.preferences.get(envKey(message)) ?? PreferenceBook.of([]);
    return book.resolve(message.user_id, type, message.sub_notification_id, channel);
  }

  /** The digest a message carries (its request names it and the digest was claimed with this message); undefined otherwise. */
  digestCarried(message: MessageRow, digestId: string): Promise<DigestRow | undefined> {
    return new DigestsRepository(this.deps.db).carriedBy(message.account_id, message.env_id, digestId, message.tracking_id);
  }

  /** The type's digest template on a channel for a digest option; null: the built-in one applies. */
  digestTemplate(message: MessageRow, channel: string, option: DigestOption): Promise<ResolvedTemplate | null> {
    return this.once(`digest\u0000${typeKey(message)}\u0000${channel}\u0000${option}`, () =>
      this.templates.digestTemplate(message.account_id, message.env_id, message.notification_id, channel, option),
    );
  }

  environment(message: MessageRow): Promise<EnvironmentRow | undefined> {
    return this.once(`env\u0000${envKey(message)}`, () => new EnvironmentsRepository(this.deps.db).find(message.account_id, message.env_id));
  }

  type(message: MessageRow): Promise<NotificationType> {
    return this.once(`type\u0000${typeKey(message)}`, () => ensureType(this.deps, message.account_id, message.env_id, message.notification_id));
  }

  /** The channels that have a template for the message's type. */
  channelsWithTemplates(message: MessageRow): Promise<Set<string>> {
    return this.once(`templated\u0000${typeKey(message)}`, () =>
      new TemplatesRepository(this.deps.db).channelsWithTemplates(message.account_id, message.env_id, message.notification_id),
    );
  }

  resolveTemplate(message: MessageRow, channel: string, templateId: string | undefined): Promise<ResolvedTemplate | null> {
    return this.once(`template\u0000${typeKey(message)}\u0000${channel}\u0000${templateId ?? ''}`, () =>
      this.templates.resolveTemplate(message.account_id, message.env_id, message.notification_id, channel, templateId),
    );
  }

  /** The environment's components, each read once per batch however many messages render it. */
  components(message: MessageRow): ComponentResolver {
    const resolve = componentResolver(this.deps, message.account_id, message.env_id);
    return async (ids) => {
      const found = new Map<string, string>();
      const missing: string[] = [];
      for (const id of ids) {
        const html = this.shared.get(`component\u0000${envKey(message)}\u0000${id}`) as Promise<string | undefined> | undefined;
        if (html) {
          const value = await html;
          if (value !== undefined) found.set(id, value);
        } else missing.push(id);
      }
      if (missing.length === 0) return found;
      const read = resolve(missing).then((answer) => (answer instanceof Map ? answer : new Map(Object.entries(answer))));
      for (const id of missing) {
        const html = read.then((m) => m.get(id));
        // Its failure is the caller's (awaited below); a later message that reads it meets it too.
        html.catch(() => undefined);
        this.shared.set(`component\u0000${envKey(message)}\u0000${id}`, html);
      }
      for (const [id, html] of await read) found.set(id, html);
      return found;
    };
  }

  private once<T>(key: string, read: () => Promise<T>): Promise<T> {
    let value = this.shared.get(key) as Promise<T> | undefined;
    if (!value) {
      value = read();
      this.shared.set(key, value);
    }
    return value;
  }
}

const NONE: ReadonlySet<string> = new Set();
/** The number an SMS of the message goes to: the one stored at intake, else the user's (as the SMS executor picks). */
const smsNumberOf = (m: MessageRow, user: User | undefined) => m.user_number ?? user?.number ?? undefined;
const envKey = (m: MessageRow) => `${m.account_id}\u0000${m.env_id}`;
const typeKey = (m: MessageRow) => `${envKey(m)}\u0000${m.notification_id}`;
