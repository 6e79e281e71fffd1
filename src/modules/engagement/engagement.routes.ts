import { Type } from '@sinclair/typebox';
import { AppError } from '../../errors.js';
import { MediaResponse, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import { ENGAGEMENT_PATHS, type EngagementClient, type EngagementService } from './engagement.service.js';

/** A transparent 1x1 GIF (43 bytes). */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const NO_STORE = 'no-store, no-cache, must-revalidate, private, max-age=0';
const TokenParams = Type.Object({ token: Type.String({ minLength: 1, maxLength: 8192 }) });
const TrackingSettingSchema = Type.Object({
  opens: Type.Boolean({ description: 'a 1x1 pixel at the end of the HTML records opens (EMAIL_OPEN)' }),
  clicks: Type.Boolean({ description: 'http(s) links go through a tracked redirect (EMAIL_CLICK); `data-no-track` on a link keeps it as written' }),
});

/** Every refusal of a token looks the same: forged, altered, of another kind, environment gone. */
const refused = () => new AppError('NOT_FOUND', 'Not found.', 'The link is not valid; use a link from the email as it was sent.');

/**
 * The unsubscribe pages' headers: never cached (a token's page is one user's), never framed by
 * another site (a page that unsubscribes with one click must not sit under a decoy), read as the
 * HTML they are, and allowed nothing but their inline style and their form posting to itself.
 */
const PAGE_HEADERS = {
  'cache-control': NO_STORE,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
};

const HtmlPage = (description: string) => withErrors({ 200: MediaResponse('text/html', description) });

const clientOf = (req: { headers: Record<string, string | string[] | undefined>; ip: string }): EngagementClient => {
  const ua = req.headers['user-agent'];
  return { ...(typeof ua === 'string' && ua ? { userAgent: ua.slice(0, 512) } : {}), ip: req.ip };
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex">` +
  `<title>${title}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}button{font-size:1rem;padding:.6rem 1.2rem;cursor:pointer}</style></head>` +
  `<body><h1>${title}</h1>${body}</body></html>`;

/**
 * The public routes of email engagement (no credentials: the signed token is the authority) and
 * the environment's tracking switches.
 */
export async function engagementRoutes(app: App, service: EngagementService): Promise<void> {
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });
  const tags = ['engagement'];

  app.get(
    '/settings/email/tracking',
    { schema: { tags: ['settings'], summary: "The environment's open and click tracking (both on by default)", response: withErrors({ 200: TrackingSettingSchema }) } },
    (req) => service.getTrackingSetting(scope(req.auth)),
  );
  app.put(
    '/settings/email/tracking',
    {
      schema: {
        tags: ['settings'],
        summary: "Turn the environment's open and/or click tracking on or off (applies to mail sent from now on)",
        body: Type.Object({ opens: Type.Optional(Type.Boolean()), clicks: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
        response: withErrors({ 200: TrackingSettingSchema }),
      },
    },
    (req) => service.putTrackingSetting(scope(req.auth), req.body),
  );

  app.get(
    ENGAGEMENT_PATHS.open,
    { config: { auth: 'none' }, schema: { tags, summary: 'Open tracking pixel: records the open, answers a 1x1 GIF (never cached)', params: TokenParams, response: withErrors({ 200: MediaResponse('image/gif', 'A transparent 1x1 GIF', Type.String({ format: 'binary' })) }) } },
    async (req, reply) => {
      const opened = await service.open(req.params.token, clientOf(req));
      if (opened === null) throw refused();
      return reply.header('cache-control', NO_STORE).header('pragma', 'no-cache').header('expires', '0').type('image/gif').send(PIXEL);
    },
  );

  app.get(
    ENGAGEMENT_PATHS.click,
    { config: { auth: 'none' }, schema: { tags, summary: 'Tracked link: records the click, redirects (302) to the link as written', params: TokenParams, response: withErrors({ 302: Type.Null({ description: 'Redirect to the link as written (Location)' }) }) } },
    async (req, reply) => {
      const url = await service.click(req.params.token, clientOf(req));
      if (url === null) throw refused();
      return reply.header('cache-control', NO_STORE).header('referrer-policy', 'no-referrer').redirect(url, 302);
    },
  );

  // RFC 8058: mail clients POST List-Unsubscribe=One-Click as multipart/form-data or a form; the
  // page's button posts a form with source=page. The body decides nothing (the token does), so
  // this scope takes any body up to 16 KB as text, instead of the API's JSON parsing.
  await app.register((unsubscribeScope, _options, done) => {
    const child = unsubscribeScope as unknown as App;
    child.removeAllContentTypeParsers();
    child.addContentTypeParser('*', { parseAs: 'string', bodyLimit: 16 * 1024 }, (_req, body, next) => next(null, String(body)));

    child.get(
      ENGAGEMENT_PATHS.unsubscribe,
      { config: { auth: 'none' }, schema: { tags, summary: 'Unsubscribe confirmation page (HTML; its button POSTs). Changes nothing by itself: link scanners fetch it', params: TokenParams, response: HtmlPage('The confirmation page') } },
      async (req, reply) => {
        const target = service.unsubscribeTarget(req.params.token);
        if (!target) throw refused();
        const html = page(
          'Unsubscribe',
          `<p>Stop emails of the type <strong>${escapeHtml(target.notificationId)}</strong>?</p>` +
            `<form method="post" action=""><input type="hidden" name="List-Unsubscribe" value="One-Click"><input type="hidden" name="source" value="page"><button type="submit">Unsubscribe</button></form>`,
        );
        return reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(html);
      },
    );

    child.post(
      ENGAGEMENT_PATHS.unsubscribe,
      { config: { auth: 'none' }, schema: { tags, summary: 'One-click unsubscribe (RFC 8058): turns this notification type\'s email off for the user; no login, the token is the authority', params: TokenParams, response: HtmlPage('A page saying the user is unsubscribed') } },
      async (req, reply) => {
        const method = typeof req.body === 'string' && /(?:^|&)source=page(?:&|$)/.test(req.body) ? 'page' : 'one-click';
        if (!(await service.unsubscribe(req.params.token, clientOf(req), method))) throw refused();
        const html = page('Unsubscribed', '<p>You will not get these emails any more.</p>');
        return reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(html);
      },
    );
    done();
  });
}
