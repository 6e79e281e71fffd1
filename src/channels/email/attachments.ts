import { Type } from '@sinclair/typebox';
import { AppError, invalid } from '../../errors.js';
import { SafeFetchError, safeFetch } from '../../net/ssrf.js';
import { DeliveryError, type EmailAttachment } from '../types.js';

/** Inline (base64) attachments: "about 4 MB raw per file" (spec Limits); over it the send answers 413. */
export const INLINE_ATTACHMENT_MAX_BYTES = 4 * 1024 * 1024;
/** Attachments by URL: up to 20 MB per file, enforced while downloading. */
export const URL_ATTACHMENT_MAX_BYTES = 20 * 1024 * 1024;
export const MAX_ATTACHMENTS = 20;
export const ATTACHMENT_FETCH_TIMEOUT_MS = 30_000;

/**
 * One `options.email.attachments` entry, as the pingram SDK sends it
 * (SenderPostBodyOptionsEmailAttachmentsInner: anyOf {filename, url} | {filename, content, contentType?}).
 * The SDK's generated type marks both url and content required, so callers may send one of them empty.
 */
export const EmailAttachmentInputSchema = Type.Object(
  {
    filename: Type.String({ minLength: 1, maxLength: 255 }),
    url: Type.Optional(Type.String({ maxLength: 4096 })),
    content: Type.Optional(Type.String({ description: 'base64, about 4 MB raw at most' })),
    contentType: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { description: 'by URL (up to 20 MB) or by inline base64 content (about 4 MB)' },
);

export interface EmailAttachmentInput {
  filename: string;
  url?: string;
  content?: string;
  contentType?: string;
}

const CONTENT_TYPE = /^[a-z0-9][\w!#$&^.+-]*\/[a-z0-9][\w!#$&^.+-]*(\s*;\s*[\w.+-]+=("[^"\r\n]*"|[\w.+-]+))*$/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Decoded size of a base64 string without decoding it. */
export function base64DecodedLength(b64: string): number {
  const padding = b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0;
  return Math.floor((b64.length * 3) / 4) - padding;
}

/**
 * Checks the `options.email.attachments` of a send request and returns them normalised for the
 * provider. Throws 400 VALIDATION_FAILED for malformed entries and 413 ATTACHMENT_TOO_LARGE when an
 * inline file is over the limit. URL targets are only syntax-checked here; the SSRF guard runs at fetch time.
 */
export function validateInlineAttachments(attachments: unknown): EmailAttachment[] {
  if (attachments === undefined || attachments === null) return [];
  if (!Array.isArray(attachments)) throw invalid('options.email.attachments must be an array.');
  if (attachments.length > MAX_ATTACHMENTS) {
    throw invalid(`At most ${MAX_ATTACHMENTS} attachments per email, got ${attachments.length}.`);
  }
  return attachments.map((entry: unknown, i) => {
    const where = `options.email.attachments[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) throw invalid(`${where} must be an object.`);
    const { filename, url, content, contentType } = entry as Record<string, unknown>;
    if (typeof filename !== 'string' || filename.trim() === '' || filename.length > 255 || CONTROL.test(filename)) {
      throw invalid(`${where}.filename must be a non-empty name of at most 255 characters without control characters.`);
    }
    for (const [name, value] of [['url', url], ['content', content], ['contentType', contentType]] as const) {
      if (value !== undefined && value !== null && typeof value !== 'string') throw invalid(`${where}.${name} must be a string.`);
    }
    let type = typeof contentType === 'string' && contentType !== '' ? contentType.trim() : undefined;
    if (type !== undefined && !CONTENT_TYPE.test(type)) throw invalid(`${where}.contentType "${type.slice(0, 100)}" is not a MIME type.`);
    const hasUrl = typeof url === 'string' && url !== '';
    let data = typeof content === 'string' && content !== '' ? content : undefined;
    if (hasUrl === (data !== undefined)) {
      throw invalid(`${where} needs exactly one of "url" or "content" (base64).`, 'Send {filename, url} or {filename, content, contentType?}.');
    }
    if (hasUrl) {
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        throw invalid(`${where}.url is not a valid URL.`);
      }
      if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw invalid(`${where}.url must be http or https.`);
      return { filename, url: parsed.href, ...(type ? { contentType: type } : {}) };
    }
    // Accept a data: URL too, taking its media type when none was given.
    const dataUrl = /^data:([^;,]*)(;[^,]*)?;base64,/i.exec(data!);
    if (dataUrl) {
      data = data!.slice(dataUrl[0].length);
      if (!type && dataUrl[1] && CONTENT_TYPE.test(dataUrl[1])) type = dataUrl[1];
    }
    data = data!.replace(/\s+/g, '');
    if (!BASE64.test(data)) throw invalid(`${where}.content must be base64.`);
    const size = base64DecodedLength(data);
    if (size > INLINE_ATTACHMENT_MAX_BYTES) {
      throw new AppError(
        'ATTACHMENT_TOO_LARGE',
        `${where} ("${filename}") is ${size} bytes; inline attachments are limited to ${INLINE_ATTACHMENT_MAX_BYTES} bytes.`,
        'Attach large files by URL instead (up to 20 MB).',
      );
    }
    return { filename, content: data, ...(type ? { contentType: type } : {}) };
  });
}

export interface ResolvedAttachment {
  filename: string;
  content: Buffer;
  contentType?: string;
  source: 'url' | 'inline';
  url?: string;
}

export interface AttachmentFetchOptions {
  allowPrivateNetworks?: boolean;
  timeoutMs?: number;
  maxBytes?: number;
}

/** Downloads or decodes every attachment; failures become DeliveryErrors the engine can record. */
export async function resolveAttachments(list: EmailAttachment[] | undefined, options: AttachmentFetchOptions = {}): Promise<ResolvedAttachment[]> {
  const out: ResolvedAttachment[] = [];
  for (const a of list ?? []) {
    if ('content' in a) {
      out.push({ filename: a.filename, content: Buffer.from(a.content, 'base64'), contentType: a.contentType, source: 'inline' });
      continue;
    }
    out.push(await fetchAttachment(a.filename, a.url, a.contentType, options));
  }
  return out;
}

async function fetchAttachment(
  filename: string,
  url: string,
  contentType: string | undefined,
  options: AttachmentFetchOptions,
): Promise<ResolvedAttachment> {
  const maxBytes = options.maxBytes ?? URL_ATTACHMENT_MAX_BYTES;
  try {
    const res = await safeFetch(url, {
      maxBytes,
      timeoutMs: options.timeoutMs ?? ATTACHMENT_FETCH_TIMEOUT_MS,
      allowPrivateNetworks: options.allowPrivateNetworks,
    });
    if (res.status < 200 || res.status > 299) {
      // A server error may pass; a missing or forbidden file will not.
      throw new DeliveryError('ATTACHMENT_FETCH_FAILED', `Attachment "${filename}": ${url} answered HTTP ${res.status}.`, {
        retryable: res.status >= 500 || res.status === 429,
        providerCode: `HTTP ${res.status}`,
      });
    }
    const served = res.contentType?.split(';')[0]?.trim();
    return { filename, content: res.body, contentType: contentType ?? served ?? undefined, source: 'url', url };
  } catch (err) {
    if (err instanceof DeliveryError) throw err;
    if (err instanceof SafeFetchError) {
      if (err.code === 'TOO_LARGE') {
        throw new DeliveryError('ATTACHMENT_TOO_LARGE', `Attachment "${filename}" at ${url} is over ${maxBytes} bytes.`, {
          retryable: false,
          providerCode: err.code,
        });
      }
      throw new DeliveryError('ATTACHMENT_FETCH_FAILED', `Attachment "${filename}": ${err.message}`, {
        // Timeouts and dropped connections are worth another try; a blocked or malformed URL is not.
        retryable: err.code === 'TIMEOUT' || err.code === 'NETWORK' || err.code === 'DNS_FAILED',
        providerCode: err.code,
      });
    }
    throw err;
  }
}
