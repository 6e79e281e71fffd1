import type { Deps } from '../../deps.js';
import { AppError, notFound } from '../../errors.js';
import { CHANNELS, type Channel } from '../../http/schemas.js';
import type { AnyDb } from '../templates/templates.tables.js';
import { type TypeOptions, checkTypeSettings } from './delivery-options.js';
import { type NotificationTypeRow, TypesRepository } from './types.repository.js';

export interface Deduplication {
  duration: number;
}
export interface Throttling {
  max: number;
  period: number;
  unit: string;
  forever: boolean;
  scope: string[];
}

/** Notification type as returned (SDK: GetNotificationsResponseInner / Notification). */
export interface NotificationType {
  envId: string;
  notificationId: string;
  title: string;
  channels: Channel[];
  enabled: boolean;
  deduplication?: Deduplication;
  throttling?: Throttling;
  retention?: number;
  options?: TypeOptions;
  templates?: { channel: Channel; templateIds: string[] }[];
}

export interface TypeCreate {
  notificationId: string;
  title: string;
  channels: Channel[];
  enabled?: boolean;
  options?: TypeOptions;
  deduplication?: Deduplication | null;
  throttling?: Throttling | null;
  retention?: number | null;
}

export type TypePatch = Partial<Omit<TypeCreate, 'notificationId'>>;

/**
 * Channels of a type created implicitly by a send or a template write: every channel that the
 * send operation can deliver (all but VOICE, which has its own call endpoints). The type is
 * enabled, so a first send behaves as if the type had been configured for "everything"; the
 * user narrows it later with PATCH /types/{id}.
 */
export const AUTO_CREATED_CHANNELS: Channel[] = CHANNELS.filter((c) => c !== 'VOICE');

const json = (value: unknown) => (value === undefined || value === null ? null : JSON.stringify(value));

export function toNotificationType(row: NotificationTypeRow): NotificationType {
  return {
    envId: row.env_id,
    notificationId: row.notification_id,
    title: row.title,
    channels: JSON.parse(row.channels) as Channel[],
    enabled: row.enabled === 1,
    ...(row.deduplication ? { deduplication: JSON.parse(row.deduplication) as Deduplication } : {}),
    ...(row.throttling ? { throttling: JSON.parse(row.throttling) as Throttling } : {}),
    ...(row.retention !== null ? { retention: row.retention } : {}),
    ...(row.options ? { options: JSON.parse(row.options) as TypeOptions } : {}),
  };
}

/** The row of a type created on first use by a send. */
export function autoCreatedTypeRow(accountId: string, envId: string, notificationId: string, now: string): NotificationTypeRow {
  return {
    env_id: envId,
    notification_id: notificationId,
    account_id: accountId,
    title: notificationId,
    channels: JSON.stringify(AUTO_CREATED_CHANNELS),
    enabled: 1,
    options: null,
    deduplication: null,
    throttling: null,
    retention: null,
    auto_created: 1,
    created_at: now,
    updated_at: now,
  };
}

/**
 * Returns the notification type, creating it when missing (enabled, AUTO_CREATED_CHANNELS,
 * title = id). Safe under concurrent calls: insert-or-ignore, then read. Pass `db` to run inside
 * the caller's transaction (e.g. the send's outbox transaction).
 */
export async function ensureType(
  deps: Pick<Deps, 'db' | 'clock'>,
  accountId: string,
  envId: string,
  notificationId: string,
  db: AnyDb = deps.db,
): Promise<NotificationType> {
  const repo = new TypesRepository(db);
  const existing = await repo.find(accountId, envId, notificationId);
  if (existing) return toNotificationType(existing);
  await repo.insertIfMissing(autoCreatedTypeRow(accountId, envId, notificationId, deps.clock.now().toISOString()));
  const row = await repo.find(accountId, envId, notificationId);
  // Only possible when the id is taken by another account's environment, which env ids rule out.
  if (!row) throw new AppError('CONFLICT', `Notification type "${notificationId}" could not be created.`);
  return toNotificationType(row);
}

export class TypesService {
  private readonly repo: TypesRepository;
  constructor(private readonly deps: Deps) {
    this.repo = new TypesRepository(deps.db);
  }

  ensureType(accountId: string, envId: string, notificationId: string, db?: AnyDb): Promise<NotificationType> {
    return ensureType(this.deps, accountId, envId, notificationId, db);
  }

  async list(accountId: string, envId: string): Promise<NotificationType[]> {
    const [rows, templates] = await Promise.all([this.repo.list(accountId, envId), this.repo.templateIds(accountId, envId)]);
    return rows.map((row) => withTemplates(toNotificationType(row), templates));
  }

  async get(accountId: string, envId: string, notificationId: string): Promise<NotificationType> {
    const row = await this.repo.find(accountId, envId, notificationId);
    if (!row) throw notFound('Notification type', notificationId, 'List notification types with GET /types, or create one with POST /types.');
    return withTemplates(toNotificationType(row), await this.repo.templateIds(accountId, envId, notificationId));
  }

  async create(accountId: string, envId: string, body: TypeCreate): Promise<NotificationType> {
    checkTypeSettings(body);
    const now = this.deps.clock.now().toISOString();
    const created = await this.repo.insertIfMissing({
      env_id: envId,
      notification_id: body.notificationId,
      account_id: accountId,
      title: body.title,
      channels: JSON.stringify(unique(body.channels)),
      enabled: body.enabled === false ? 0 : 1,
      options: json(body.options),
      deduplication: json(body.deduplication),
      throttling: json(body.throttling),
      retention: body.retention ?? null,
      auto_created: 0,
      created_at: now,
      updated_at: now,
    });
    if (!created) {
      throw new AppError(
        'CONFLICT',
        `Notification type "${body.notificationId}" already exists.`,
        `Change it with PATCH /types/${body.notificationId}, or pick another notificationId.`,
      );
    }
    return this.get(accountId, envId, body.notificationId);
  }

  async update(accountId: string, envId: string, notificationId: string, patch: TypePatch): Promise<NotificationType> {
    checkTypeSettings(patch);
    await this.get(accountId, envId, notificationId);
    await this.repo.update(accountId, envId, notificationId, {
      ...(patch.title !== undefined ? { title: patch.title } : {}),
      ...(patch.channels !== undefined ? { channels: JSON.stringify(unique(patch.channels)) } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled ? 1 : 0 } : {}),
      ...(patch.options !== undefined ? { options: json(patch.options) } : {}),
      ...(patch.deduplication !== undefined ? { deduplication: json(patch.deduplication) } : {}),
      ...(patch.throttling !== undefined ? { throttling: json(patch.throttling) } : {}),
      ...(patch.retention !== undefined ? { retention: patch.retention } : {}),
      updated_at: this.deps.clock.now().toISOString(),
    });
    return this.get(accountId, envId, notificationId);
  }

  /** Deletes the type with its templates (and their component references). */
  async delete(accountId: string, envId: string, notificationId: string): Promise<void> {
    const deleted = await this.repo.delete(accountId, envId, notificationId);
    if (!deleted) throw notFound('Notification type', notificationId, 'List notification types with GET /types.');
  }
}

const unique = <T>(items: T[]) => [...new Set(items)];

function withTemplates(
  type: NotificationType,
  rows: { notification_id: string; channel: string; template_id: string }[],
): NotificationType {
  const byChannel = new Map<Channel, string[]>();
  for (const row of rows) {
    if (row.notification_id !== type.notificationId) continue;
    const list = byChannel.get(row.channel as Channel) ?? [];
    list.push(row.template_id);
    byChannel.set(row.channel as Channel, list);
  }
  return { ...type, templates: [...byChannel].map(([channel, templateIds]) => ({ channel, templateIds })) };
}
