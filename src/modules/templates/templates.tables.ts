import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Row types of migration 0010 (notification types, templates, defaults, components, references). */
export interface NotificationTypesTable {
  env_id: string;
  notification_id: string;
  account_id: string;
  title: string;
  /** JSON array of channel names */
  channels: string;
  enabled: number;
  options: string | null;
  deduplication: string | null;
  throttling: string | null;
  retention: number | null;
  auto_created: number;
  created_at: string;
  updated_at: string;
}

export interface TemplatesTable {
  env_id: string;
  notification_id: string;
  channel: string;
  template_id: string;
  account_id: string;
  /** JSON object of the channel's content fields */
  content: string;
  created_at: string;
  updated_at: string;
}

export interface TemplateDefaultsTable {
  env_id: string;
  notification_id: string;
  channel: string;
  mode: string;
  template_id: string;
  account_id: string;
}

export interface ComponentsTable {
  env_id: string;
  component_id: string;
  account_id: string;
  name: string;
  internal: string;
  internal_page: string;
  html: string;
  created_at: string;
  updated_at: string;
}

export interface ComponentRefsTable {
  env_id: string;
  component_id: string;
  notification_id: string;
  channel: string;
  template_id: string;
  account_id: string;
}

export type TemplateTables = {
  notification_types: NotificationTypesTable;
  templates: TemplatesTable;
  template_defaults: TemplateDefaultsTable;
  components: ComponentsTable;
  component_refs: ComponentRefsTable;
};

export type TemplatesDb = Kysely<CoreTables & TemplateTables>;
/** A Kysely instance or an open transaction (callers may pass their own transaction). */
export type AnyDb = Kysely<CoreTables>;

export const templatesDb = (db: AnyDb): TemplatesDb => db.withTables<TemplateTables>();

/** The foreign key of a template's component reference to the component (migration 0010). */
export const COMPONENT_REF_FK = 'component_refs_component_fk';

/** The constraint a PostgreSQL error names; SQLite's errors name none. */
export function violatedConstraint(err: unknown): string | undefined {
  const constraint = (err as { constraint?: unknown } | null)?.constraint;
  return typeof constraint === 'string' ? constraint : undefined;
}

/** Foreign-key violation on either engine (pg 23503, SQLite SQLITE_CONSTRAINT_FOREIGNKEY). */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}
