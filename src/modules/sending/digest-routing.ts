import { BUILT_IN_DIGEST_CONTENT } from '../digests/digest-content.js';
import { type DigestSchedule, scheduleOf } from '../digests/digest-schedule.js';
import type { DigestMarker } from '../digests/digests.service.js';
import type { DigestRow } from '../digests/digests.tables.js';
import { isDigestOption } from '../types/delivery-options.js';
import type { NotificationType } from '../types/types.service.js';
import { SEND_CHANNELS, type SendChannel } from './channels.js';
import type { PlanningReads } from './planning-reads.js';
import type { SendBody } from './sending.schemas.js';
import type { MessageRow } from './sending.tables.js';

/**
 * What routing does about digests (modules/digests): whether a channel of a send is collected
 * into a digest instead of sent now, and what a digest's own message renders.
 */

/**
 * The digest a message carries, when it is a digest's message: its stored request names the
 * digest and the digest was claimed with this very trackingId (a send that names one through
 * /send finds no such digest and is an ordinary send).
 */
export async function carriedDigest(reads: PlanningReads, message: MessageRow, body: SendBody): Promise<DigestRow | undefined> {
  const id = (body as Partial<DigestMarker>).digest?.id;
  return typeof id === 'string' ? reads.digestCarried(message, id) : undefined;
}

/** A digest's message content: the type's digest template for the digest's option on its channel, else the built-in one. */
export async function digestContent(reads: PlanningReads, message: MessageRow, digest: DigestRow): Promise<{ channel: SendChannel; content: Record<string, unknown> } | undefined> {
  const channel = SEND_CHANNELS.find((c) => c.log === digest.channel)?.channel;
  if (!channel) return undefined;
  const template = await reads.digestTemplate(message, channel, digest.option);
  const content = (template?.content as Record<string, unknown> | undefined) ?? BUILT_IN_DIGEST_CONTENT[channel];
  return content ? { channel, content: { ...content } } : undefined;
}

/**
 * The digest schedule of a channel the send uses, or null to send it now. A digest applies when
 * the channel's delivery option is hourly, daily, weekly or monthly: the user's own choice always
 * (like their opt-out, forceChannels does not override it), the type's default unless the send
 * has forceChannels (which bypasses the type's channel configuration). In-app has no digests.
 */
export function digestScheduleOf(reads: PlanningReads, message: MessageRow, type: NotificationType, channel: SendChannel, forced: boolean): DigestSchedule | null {
  if (channel === 'INAPP_WEB') return null;
  const { delivery, explicit } = reads.deliveryOf(message, type, channel);
  if (!isDigestOption(delivery) || (forced && !explicit)) return null;
  return scheduleOf(type.options?.[channel], delivery);
}
