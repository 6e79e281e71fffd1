import type { Kysely } from 'kysely';

/**
 * Notification types, templates (one row per notification + channel + templateId), the default
 * template per delivery mode, email components and the component references of templates.
 * Foreign keys carry the invariants the services rely on: deleting a type removes its templates,
 * deleting a template removes its default rows and component references, and a component that is
 * still referenced cannot be deleted (the reference has no ON DELETE action), even under races.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('notification_types')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('channels', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('options', 'text')
    .addColumn('deduplication', 'text')
    .addColumn('throttling', 'text')
    .addColumn('retention', 'integer')
    .addColumn('auto_created', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('notification_types_pk', ['env_id', 'notification_id'])
    .execute();

  await db.schema
    .createTable('templates')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('template_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('templates_pk', ['env_id', 'notification_id', 'channel', 'template_id'])
    .addForeignKeyConstraint('templates_type_fk', ['env_id', 'notification_id'], 'notification_types', ['env_id', 'notification_id'], (fk) =>
      fk.onDelete('cascade'),
    )
    .execute();

  // One row per (notification, channel, delivery mode): the primary key is the "exactly one default" rule.
  await db.schema
    .createTable('template_defaults')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('mode', 'text', (c) => c.notNull())
    .addColumn('template_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('template_defaults_pk', ['env_id', 'notification_id', 'channel', 'mode'])
    .addForeignKeyConstraint(
      'template_defaults_template_fk',
      ['env_id', 'notification_id', 'channel', 'template_id'],
      'templates',
      ['env_id', 'notification_id', 'channel', 'template_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();

  await db.schema
    .createTable('components')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('component_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('internal', 'text', (c) => c.notNull())
    .addColumn('internal_page', 'text', (c) => c.notNull())
    .addColumn('html', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('components_pk', ['env_id', 'component_id'])
    .execute();

  await db.schema
    .createTable('component_refs')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('component_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('template_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('component_refs_pk', ['env_id', 'component_id', 'notification_id', 'channel', 'template_id'])
    .addForeignKeyConstraint('component_refs_component_fk', ['env_id', 'component_id'], 'components', ['env_id', 'component_id'])
    .addForeignKeyConstraint(
      'component_refs_template_fk',
      ['env_id', 'notification_id', 'channel', 'template_id'],
      'templates',
      ['env_id', 'notification_id', 'channel', 'template_id'],
      (fk) => fk.onDelete('cascade'),
    )
    .execute();
  await db.schema
    .createIndex('component_refs_template')
    .on('component_refs')
    .columns(['env_id', 'notification_id', 'channel', 'template_id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['component_refs', 'components', 'template_defaults', 'templates', 'notification_types']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
