import type { Config } from './config.js';

/** Where this server sends what it delivers, as the start banner says it: never a credential. */
export interface DeliveryTargets {
  mail: string;
  texts: string;
}

/**
 * Where mail and texts go with this configuration (the server's defaults; an environment's own
 * SMTP settings take precedence for its mail): in development the local stand-ins and the routes
 * to look at them, otherwise the host of the real service, without its user or password.
 */
export function deliveryTargets(config: Pick<Config, 'smtpUrl' | 'twilioAccountSid' | 'twilioAuthToken' | 'twilioBaseUrl' | 'devCarrier'>, baseUrl: string): DeliveryTargets {
  const mail = config.smtpUrl ? `SMTP server ${hostOf(config.smtpUrl)}` : `local outbox, not sent: GET ${baseUrl}/outbox (set SMTP_URL to send)`;
  let texts: string;
  if (config.twilioAccountSid && config.twilioAuthToken) texts = `Twilio at ${hostOf(config.twilioBaseUrl)}`;
  else if (config.devCarrier) texts = `development carrier, not sent: GET ${baseUrl}/dev-carrier/messages (set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN to send)`;
  else texts = 'nowhere: no carrier configured (set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or CLARION_DEV_CARRIER=true)';
  return { mail, texts };
}

/** host:port of a URL, nothing else of it (no user, password, path or query). */
function hostOf(raw: string): string {
  try {
    const url = new URL(raw);
    return url.port ? `${url.hostname}:${url.port}` : url.hostname;
  } catch {
    return 'an unreadable URL';
  }
}
