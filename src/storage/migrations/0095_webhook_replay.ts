import type { Kysely } from 'kysely';

/**
 * What (re)started a webhook delivery's current round of attempts: null for the event itself,
 * 'replay' (POST /webhooks/{id}/events/{eventId}/replay) or 'recover' (POST .../recover). The
 * first attempt of a round is labelled by it, so the replay of an event the endpoint never got
 * (no delivery before, or none attempted) is a 'replay', not an 'event'.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').addColumn('restarted_by', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_deliveries').dropColumn('restarted_by').execute();
}
