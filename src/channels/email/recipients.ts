import { invalid } from '../../errors.js';

/** Recipients of one email message: the user (to) plus every cc and bcc entry. */
export const MAX_EMAIL_RECIPIENTS = 50;
export const EMAIL_ADDRESS_MAX = 254;

// The WHATWG (HTML input type=email) syntax: one bare address, no display name, no list.
const EMAIL_RE = /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

export function isEmailAddress(value: unknown): value is string {
  return typeof value === 'string' && value.length <= EMAIL_ADDRESS_MAX && EMAIL_RE.test(value);
}

/**
 * Each `options.email` address entry must be exactly one address: nodemailer reads a string like
 * "a@x.com, b@y.com" as a list, so 50 entries could fan out to any number of recipients.
 */
export function validateEmailAddressOptions(email: { replyToAddresses?: unknown; ccAddresses?: unknown; bccAddresses?: unknown } | undefined): void {
  if (!email) return;
  let recipients = 1;
  for (const field of ['replyToAddresses', 'ccAddresses', 'bccAddresses'] as const) {
    const list = email[field];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) throw invalid(`options.email.${field} must be an array of email addresses.`);
    list.forEach((entry: unknown, i) => {
      if (!isEmailAddress(entry)) {
        const shown = typeof entry === 'string' ? ` ("${entry.slice(0, 100)}")` : '';
        throw invalid(
          `options.email.${field}[${i}]${shown} is not one valid email address.`,
          'Give one bare address per entry, like "alice@example.com": no display names, no comma- or semicolon-separated lists.',
        );
      }
    });
    if (field !== 'replyToAddresses') recipients += list.length;
  }
  if (recipients > MAX_EMAIL_RECIPIENTS) {
    throw invalid(
      `This email has ${recipients} recipients (the user, ccAddresses and bccAddresses); at most ${MAX_EMAIL_RECIPIENTS} per message.`,
      `Keep ccAddresses and bccAddresses to ${MAX_EMAIL_RECIPIENTS - 1} entries together, or send to each recipient as a user of its own.`,
    );
  }
}
