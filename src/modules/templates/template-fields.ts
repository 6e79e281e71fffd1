import { Type } from '@sinclair/typebox';
import { invalid } from '../../errors.js';
import { CHANNELS, type Channel } from '../../http/schemas.js';
import { type LiquidRenderer, TemplateRenderError } from '../../rendering/liquid.js';

/** Channels that have stored templates. VOICE has none: calls take inline scripts and agents. */
export const TEMPLATE_CHANNELS = ['EMAIL', 'INAPP_WEB', 'SMS', 'CALL', 'PUSH', 'WEB_PUSH', 'SLACK'] as const satisfies readonly Channel[];
export type TemplateChannel = (typeof TEMPLATE_CHANNELS)[number];

/** Which content fields apply to which channel (spec: Template; SDK: GetTemplatesListResponseInner anyOf). */
export const CHANNEL_FIELDS: Record<TemplateChannel, readonly string[]> = {
  EMAIL: ['subject', 'html', 'previewText', 'senderName', 'senderEmail', 'internal'],
  INAPP_WEB: ['title', 'redirectURL', 'imageURL', 'instant', 'batch'],
  SMS: ['text', 'mediaUrls'],
  CALL: ['text'],
  PUSH: ['title', 'message'],
  WEB_PUSH: ['title', 'message', 'icon', 'url'],
  SLACK: ['text', 'blocks', 'username', 'icon'],
};

/** Delivery modes a template can be the default for (SDK SetDefaultTemplateRequest.modes). */
export const DELIVERY_MODES = ['instant', 'hourly', 'daily', 'weekly', 'monthly'] as const;
export type DeliveryMode = (typeof DELIVERY_MODES)[number];

export interface TemplateContent {
  subject?: string;
  html?: string;
  previewText?: string;
  senderName?: string;
  senderEmail?: string;
  internal?: string;
  title?: string;
  redirectURL?: string;
  imageURL?: string;
  instant?: { title?: string; redirectURL?: string; imageURL: string };
  batch?: { title: string; redirectURL: string; imageURL: string };
  text?: string;
  mediaUrls?: string[];
  message?: string;
  icon?: string;
  url?: string;
  blocks?: Record<string, unknown>[];
  username?: string;
}

export const ALL_CONTENT_FIELDS = [...new Set(Object.values(CHANNEL_FIELDS).flat())];

// Lower-case log-filter names and the SDK's spellings, mapped to the channel enum.
const CHANNEL_ALIASES: Record<string, Channel> = {
  INAPP: 'INAPP_WEB',
  MOBILE_PUSH: 'PUSH',
  WEBPUSH: 'WEB_PUSH',
};

/** Path channel: the enum, case-insensitive, plus the lower-case log names (inapp, mobile_push, web_push). */
export function parseTemplateChannel(raw: string): TemplateChannel {
  const upper = raw.trim().toUpperCase().replace(/-/g, '_');
  const channel = CHANNEL_ALIASES[upper] ?? upper;
  if ((TEMPLATE_CHANNELS as readonly string[]).includes(channel)) return channel as TemplateChannel;
  if ((CHANNELS as readonly string[]).includes(channel)) {
    throw invalid(`Channel ${channel} has no templates.`, `Templates exist for ${TEMPLATE_CHANNELS.join(', ')}.`);
  }
  throw invalid(`Unknown channel "${raw}".`, `Use one of ${TEMPLATE_CHANNELS.join(', ')} in the path.`);
}

const Text = (max = 10_000) => Type.String({ maxLength: max });
const Big = Type.String({ maxLength: 1_000_000 });

/** Every content field, each optional; which apply is checked per channel by validateContent. */
export const contentProperties = {
  subject: Type.Optional(Text(2_000)),
  html: Type.Optional(Big),
  previewText: Type.Optional(Text(2_000)),
  senderName: Type.Optional(Text(500)),
  senderEmail: Type.Optional(Text(500)),
  internal: Type.Optional(Big),
  title: Type.Optional(Text(2_000)),
  redirectURL: Type.Optional(Text(4_000)),
  imageURL: Type.Optional(Text(4_000)),
  instant: Type.Optional(
    Type.Object(
      { title: Type.Optional(Text(2_000)), redirectURL: Type.Optional(Text(4_000)), imageURL: Text(4_000) },
      { additionalProperties: false },
    ),
  ),
  batch: Type.Optional(
    Type.Object({ title: Text(2_000), redirectURL: Text(4_000), imageURL: Text(4_000) }, { additionalProperties: false }),
  ),
  text: Type.Optional(Text(100_000)),
  mediaUrls: Type.Optional(Type.Array(Text(4_000), { maxItems: 10 })),
  message: Type.Optional(Text(10_000)),
  icon: Type.Optional(Text(4_000)),
  url: Type.Optional(Text(4_000)),
  blocks: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Any()), { maxItems: 100 })),
  username: Type.Optional(Text(500)),
};

/**
 * Refuses fields that do not apply to the channel and content that is not valid Liquid.
 * Returns the component ids the email html references.
 */
export function validateContent(renderer: LiquidRenderer, channel: TemplateChannel, fields: TemplateContent): { componentIds: string[] } {
  const content = fields as Record<string, unknown>;
  const allowed = CHANNEL_FIELDS[channel];
  const misplaced = Object.keys(content).filter((k) => content[k] !== undefined && !allowed.includes(k));
  if (misplaced.length > 0) {
    throw invalid(
      `Field${misplaced.length > 1 ? 's' : ''} ${misplaced.join(', ')} do${misplaced.length > 1 ? '' : 'es'} not apply to ${channel} templates.`,
      `${channel} templates take ${allowed.join(', ')}.`,
    );
  }
  let componentIds: string[] = [];
  for (const [field, value] of Object.entries(content)) {
    if (value === undefined || field === 'internal') continue;
    try {
      if (channel === 'EMAIL' && field === 'html') componentIds = renderer.check(value as string, { html: true, field }).componentIds;
      else checkDeep(renderer, value, field);
    } catch (err) {
      if (err instanceof TemplateRenderError) {
        throw invalid(`Invalid Liquid in ${err.message}`, "Fix the merge-tag syntax: {{ name }}, {{ user.email }}, {% if %}...{% endif %}, {% for %}...{% endfor %}; filters must exist.");
      }
      throw err;
    }
  }
  return { componentIds };
}

function checkDeep(renderer: LiquidRenderer, value: unknown, field: string): void {
  if (typeof value === 'string') renderer.check(value, { field });
  else if (Array.isArray(value)) value.forEach((v, i) => checkDeep(renderer, v, `${field}[${i}]`));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) checkDeep(renderer, v, `${field}.${k}`);
}
