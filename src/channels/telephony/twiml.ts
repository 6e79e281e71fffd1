const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

export function escapeXml(text: string): string {
  // Characters XML 1.0 cannot carry at all are dropped rather than breaking the document.
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return text.replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '').replace(/[&<>"']/g, (c) => XML_ESCAPES[c]);
}

/** Twilio's limit on TwiML given inline (the Twiml parameter of a call): longer fails with error 32018. */
export const MAX_INLINE_TWIML_CHARS = 4000;

/** TwiML that speaks one text and hangs up. */
export function sayTwiml(text: string): string {
  return `<Response><Say>${escapeXml(text)}</Say></Response>`;
}

/** The text of every <Say> of a TwiML document (the local carrier "speaks" it to time the call). */
export function spokenText(twiml: string): string {
  const unescape = (s: string) => s.replace(/&(amp|lt|gt|quot|apos);/g, (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" })[e]!);
  return [...twiml.matchAll(/<Say[^>]*>([\s\S]*?)<\/Say>/g)].map((m) => unescape(m[1])).join(' ');
}

export const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';
