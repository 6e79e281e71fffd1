import type http from 'node:http';
import { randomBytes } from 'node:crypto';

/** What the authorize page was asked for (one per visit). */
export interface PeerAuthorization {
  client_id: string;
  scope: string;
  redirect_uri: string;
  state: string;
}

export interface SlackOauthPeerOptions {
  /** Slack apps that may install: their client id and secret. */
  apps: { clientId: string; clientSecret: string }[];
  team: { id: string; name: string };
  /** The Slack user who approves installs (authed_user.id). */
  installer: string;
  /** Makes a token an install issued valid on the Web API peer. */
  grant(token: string): void;
}

const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const random = () => randomBytes(6).toString('hex');

/**
 * Slack's OAuth v2 for the Slack peer (slack-peer.ts): the authorize page, as it ends once the
 * installing user clicks Allow (or Cancel), and oauth.v2.access, Slack's code exchange.
 */
export function slackOauthPeer(options: SlackOauthPeerOptions) {
  const { apps, team } = options;
  const codes = new Map<string, { clientId: string; redirectUri: string; scope: string }>();
  const authorizations: PeerAuthorization[] = [];
  const installs: Record<string, unknown>[] = [];
  let denyNext = false;

  /**
   * GET /oauth/v2/authorize as Slack's page would end once the user clicks Allow (or Cancel): a
   * 302 to redirect_uri with a single-use code (or error=access_denied) and the state unchanged.
   */
  function authorize(url: URL, res: http.ServerResponse): void {
    const q = Object.fromEntries(url.searchParams) as Partial<PeerAuthorization>;
    authorizations.push({ client_id: q.client_id ?? '', scope: q.scope ?? '', redirect_uri: q.redirect_uri ?? '', state: q.state ?? '' });
    if (!apps.some((a) => a.clientId === q.client_id) || !q.redirect_uri) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      return void res.end('Invalid client_id parameter');
    }
    const back = new URL(q.redirect_uri);
    if (denyNext) {
      denyNext = false;
      back.searchParams.set('error', 'access_denied');
    } else {
      const code = `${authorizations.length}.${random()}`;
      codes.set(code, { clientId: q.client_id!, redirectUri: q.redirect_uri, scope: q.scope ?? '' });
      back.searchParams.set('code', code);
    }
    if (q.state !== undefined) back.searchParams.set('state', q.state);
    res.writeHead(302, { location: back.href });
    res.end();
  }

  /** oauth.v2.access: the app's credentials (form body or Basic) and a code it was given, once, for the same redirect_uri. */
  function access(args: Record<string, unknown>, authorization: string | undefined): Record<string, unknown> {
    const basic = /^Basic (.+)$/.exec(authorization ?? '')?.[1];
    const [basicId, basicSecret] = basic ? Buffer.from(basic, 'base64').toString('utf8').split(':') : [];
    const clientId = text(args.client_id) || basicId;
    const clientSecret = text(args.client_secret) || basicSecret;
    const app = apps.find((a) => a.clientId === clientId);
    if (!app) return { ok: false, error: 'invalid_client_id' };
    if (app.clientSecret !== clientSecret) return { ok: false, error: 'bad_client_secret' };
    const grant = codes.get(text(args.code));
    if (!grant || grant.clientId !== clientId) return { ok: false, error: 'invalid_code' };
    codes.delete(text(args.code));
    if (grant.redirectUri !== text(args.redirect_uri)) return { ok: false, error: 'bad_redirect_uri' };
    const bot = `xoxb-${team.id}-${random()}`;
    const user = `xoxp-${team.id}-${random()}`;
    options.grant(bot);
    options.grant(user);
    const installer = options.installer;
    const answer = {
      ok: true,
      app_id: 'APEER',
      authed_user: { id: installer, scope: '', access_token: user, token_type: 'user' },
      scope: grant.scope,
      token_type: 'bot',
      access_token: bot,
      bot_user_id: 'UBOT',
      team,
      enterprise: null,
      is_enterprise_install: false,
    };
    installs.push(answer);
    return answer;
  }

  return {
    authorize,
    access,
    authorizations,
    installs,
    denyNext: () => {
      denyNext = true;
    },
  };
}
