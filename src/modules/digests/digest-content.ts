import type { SendChannel } from '../sending/channels.js';
import { type SendBody, parametersOf } from '../sending/sending.schemas.js';
import type { DigestItemRow } from './digests.repository.js';
import type { DigestRow } from './digests.tables.js';

/**
 * What a digest's template renders, and the built-in template used when the type has none for
 * the digest's option on that channel. The type's digest template is the channel's template that
 * is the default for the digest's delivery mode (POST /types/{id}/templates/{channel}/{templateId}/default
 * with `modes: ["daily"]`, the pingram SDK's setDefaultTemplate); see docs/digests.md.
 */

/** Liquid over the items, per channel, in the fields of a stored template of that channel. */
export const BUILT_IN_DIGEST_CONTENT: Partial<Record<SendChannel, Record<string, string>>> = {
  EMAIL: {
    subject: '{{ count }} new notification{% if count != 1 %}s{% endif %}',
    html: '<p>{{ count }} new notification{% if count != 1 %}s{% endif %}:</p><ul>{% for item in items %}<li>{{ item.preview }}</li>{% endfor %}</ul>',
  },
  SMS: { text: '{{ count }} new: {% for item in items %}{{ item.preview }}{% unless forloop.last %}; {% endunless %}{% endfor %}' },
  CALL: { text: 'You have {{ count }} new notifications. {% for item in items %}{{ item.preview }}. {% endfor %}' },
  PUSH: { title: '{{ count }} new notifications', message: '{% for item in items %}{{ item.preview }}{% unless forloop.last %}\n{% endunless %}{% endfor %}' },
  WEB_PUSH: { title: '{{ count }} new notifications', message: '{% for item in items %}{{ item.preview }}{% unless forloop.last %}\n{% endunless %}{% endfor %}' },
  SLACK: { text: '{{ count }} new notifications:\n{% for item in items %}• {{ item.preview }}\n{% endfor %}' },
};

/** One collected message as the template sees it (`{% for item in items %}`). */
export interface DigestItem {
  trackingId: string;
  /** When the send was accepted (ISO 8601). */
  date: string;
  subNotificationId?: string;
  /** The send's parameters (mergeTags). */
  parameters: Record<string, unknown>;
  /** The log preview of the item's own rendered content on this channel. */
  preview: string;
  /** The item's own rendered content on this channel, but an email's html (a digest would repeat every page). */
  content: Record<string, unknown>;
}

/** The parameters of a digest's message: `items`, `count` and `digest` (option, due time, zone). */
export function digestParameters(digest: DigestRow, rows: DigestItemRow[]): { items: DigestItem[]; count: number; digest: Record<string, unknown> } {
  const items = rows.map((row): DigestItem => {
    const request = JSON.parse(row.request) as SendBody;
    const content = row.content ? (JSON.parse(row.content) as Record<string, unknown>) : {};
    delete content.html;
    return {
      trackingId: row.tracking_id,
      date: row.received_at,
      ...(row.sub_notification_id ? { subNotificationId: row.sub_notification_id } : {}),
      parameters: parametersOf(request),
      preview: row.preview ?? '',
      content,
    };
  });
  return { items, count: items.length, digest: { id: digest.id, option: digest.option, dueAt: digest.due_at, timezone: digest.timezone, notificationId: digest.notification_id } };
}
