import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type PeerAuthorization, slackOauthPeer } from './slack-oauth-peer.js';

export type { PeerAuthorization } from './slack-oauth-peer.js';

/**
 * A local Slack Web API: POST /api/<method> with form-urlencoded or JSON bodies, bearer tokens
 * (header, or `token` in the body as Slack also accepts), `{ok: false, error}` answers with
 * HTTP 200 as Slack gives them, and 429 + Retry-After for rate limits. It keeps a small
 * workspace (channels, users, DM conversations) and records every call as received.
 */

export interface PeerChannel {
  id: string;
  name: string;
  /** The bot is not a member: chat.postMessage answers not_in_channel. */
  notMember?: boolean;
  isPrivate?: boolean;
  /** Left out of conversations.list with exclude_archived. */
  archived?: boolean;
}

export interface PeerUser {
  id: string;
  name: string;
  display_name?: string;
  deleted?: boolean;
}

export interface SlackCall {
  method: string;
  /** The bearer token the call carried. */
  token?: string;
  /** Whether the token came in the Authorization header (the WebClient's way) or the body. */
  tokenIn?: 'header' | 'body';
  contentType: string;
  /** Arguments as received: form values are strings (objects JSON-encoded), JSON bodies keep their types. */
  args: Record<string, unknown>;
  at: number;
}

export type PeerFault = { error: string } | { ratelimited: number | null };

export interface SlackPeerOptions {
  /** Valid tokens; the workspace answers invalid_auth for any other. */
  tokens: string[];
  channels?: PeerChannel[];
  users?: PeerUser[];
  /** Largest users.list page, whatever `limit` asks, so lookups paginate. */
  maxPageSize?: number;
  team?: { id: string; name: string };
  /** Slack apps that may install (OAuth v2): their client id and secret. */
  apps?: { clientId: string; clientSecret: string }[];
  /** The Slack user who approves installs (authed_user.id); default the first user. */
  installer?: string;
}


export interface SlackPeer {
  /** Base URL for `slackApiUrl`, ending in /api/. */
  url: string;
  calls: SlackCall[];
  callsOf(method: string): SlackCall[];
  /** Answers the next `times` calls of `method` with this fault. */
  fail(method: string, fault: PeerFault, times?: number): void;
  /** Messages posted, by conversation id. */
  posted: { channel: string; ts: string; args: Record<string, unknown>; token?: string }[];
  waitForPosts(count: number, timeoutMs?: number): Promise<SlackPeer['posted']>;
  /** Visits of GET /oauth/v2/authorize (the installing user approves at once, unless denyNextInstall). */
  authorizations: PeerAuthorization[];
  /** The next authorize visit is cancelled by the user: redirect with error=access_denied. */
  denyNextInstall(): void;
  /** Answers of oauth.v2.access that succeeded (their bot tokens work on this peer from then on). */
  installs: Record<string, unknown>[];
  reset(): void;
  close(): Promise<void>;
}

export async function startSlackPeer(options: SlackPeerOptions): Promise<SlackPeer> {
  const tokens = new Set(options.tokens);
  const channels = options.channels ?? [];
  const users = options.users ?? [];
  const maxPage = options.maxPageSize ?? 2;
  const team = options.team ?? { id: 'T0PEER', name: 'Peer workspace' };
  const calls: SlackCall[] = [];
  const posted: SlackPeer['posted'] = [];
  const faults = new Map<string, PeerFault[]>();
  const dms = new Map<string, string>();
  let seq = 0;
  const waiters = new Set<() => void>();
  // Installs (OAuth v2): the tokens they issue work on this peer from then on.
  const oauth = slackOauthPeer({ apps: options.apps ?? [], team, installer: options.installer ?? users[0]?.id ?? 'UINSTALLER', grant: (token) => tokens.add(token) });

  const dmOf = (userId: string) => {
    let id = dms.get(userId);
    if (!id) dms.set(userId, (id = `D${userId.slice(1)}X`));
    return id;
  };

  /** A page of `items` from the cursor and limit of `args`, at most maxPage long; next is '' on the last. */
  const paged = <T>(items: T[], args: Record<string, unknown>): { page: T[]; next: string } => {
    const start = args.cursor ? Number(Buffer.from(argText(args.cursor), 'base64url').toString('utf8').replace('offset:', '')) : 0;
    const size = Math.min(Number(args.limit ?? 1000) || 1000, maxPage);
    const next = start + size < items.length ? Buffer.from(`offset:${start + size}`).toString('base64url') : '';
    return { page: items.slice(start, start + size), next };
  };
  const member = (u: PeerUser) => ({ id: u.id, team_id: team.id, name: u.name, deleted: !!u.deleted, profile: { display_name: u.display_name ?? '', display_name_normalized: u.display_name ?? '' } });

  /** An argument as text: form bodies carry strings; a JSON body may carry other values. */
  const argText = (value: unknown): string => (typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value));

  function handle(method: string, args: Record<string, unknown>): { status?: number; headers?: Record<string, string>; body: Record<string, unknown> } {
    const fault = faults.get(method)?.shift();
    if (fault) {
      if ('ratelimited' in fault) {
        return { status: 429, headers: fault.ratelimited === null ? {} : { 'retry-after': String(fault.ratelimited) }, body: { ok: false, error: 'ratelimited' } };
      }
      return { body: { ok: false, error: fault.error } };
    }
    switch (method) {
      case 'auth.test':
        return { body: { ok: true, url: 'https://peer.slack.test/', team: team.name, team_id: team.id, user: 'clarion', user_id: 'UBOT', bot_id: 'BBOT' } };
      case 'chat.postMessage': {
        const target = argText(args.channel);
        if (!target) return { body: { ok: false, error: 'channel_not_found' } };
        let id: string | undefined;
        let member = true;
        const byName = channels.find((c) => `#${c.name}` === target || c.name === target);
        const byId = channels.find((c) => c.id === target);
        const channel = byId ?? byName;
        if (channel) {
          id = channel.id;
          member = !channel.notMember;
        } else if ([...dms.values()].includes(target)) id = target;
        if (!id) return { body: { ok: false, error: 'channel_not_found' } };
        if (!member) return { body: { ok: false, error: 'not_in_channel' } };
        const hasBlocks = args.blocks !== undefined && args.blocks !== '';
        if (!args.text && !hasBlocks) return { body: { ok: false, error: 'no_text' } };
        seq += 1;
        const ts = `${1_700_000_000 + seq}.${String(seq).padStart(6, '0')}`;
        return { body: { ok: true, channel: id, ts, message: { type: 'message', text: args.text, ts, bot_id: 'BBOT' } } };
      }
      case 'conversations.open': {
        const ids = argText(args.users).split(',').filter(Boolean);
        if (ids.length !== 1) return { body: { ok: false, error: 'invalid_arguments' } };
        const user = users.find((u) => u.id === ids[0]);
        if (!user) return { body: { ok: false, error: 'user_not_found' } };
        if (user.deleted) return { body: { ok: false, error: 'user_disabled' } };
        return { body: { ok: true, channel: { id: dmOf(user.id) } } };
      }
      case 'users.list': {
        const { page, next } = paged(users, args);
        return { body: { ok: true, members: page.map(member), response_metadata: { next_cursor: next } } };
      }
      case 'users.info': {
        const user = users.find((u) => u.id === argText(args.user));
        return { body: user ? { ok: true, user: member(user) } : { ok: false, error: 'user_not_found' } };
      }
      case 'conversations.list': {
        const types = argText(args.types || 'public_channel').split(',');
        const excludeArchived = args.exclude_archived === true || args.exclude_archived === 'true';
        const listed = channels.filter((c) => types.includes(c.isPrivate ? 'private_channel' : 'public_channel') && !(excludeArchived && c.archived));
        const { page, next } = paged(listed, args);
        return {
          body: {
            ok: true,
            channels: page.map((c) => ({ id: c.id, name: c.name, is_channel: true, is_private: !!c.isPrivate, is_archived: !!c.archived, is_member: !c.notMember, context_team_id: team.id })),
            response_metadata: { next_cursor: next },
          },
        };
      }
      default:
        return { body: { ok: false, error: 'unknown_method' } };
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const contentType = String(req.headers['content-type'] ?? '');
      const send = (status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'GET' && req.url?.startsWith('/oauth/v2/authorize')) return oauth.authorize(new URL(req.url, 'http://peer'), res);
      const match = /^\/api\/([\w.]+)$/.exec(req.url?.split('?')[0] ?? '');
      if (req.method !== 'POST' || !match) return send(404, { ok: false, error: 'unknown_method' });
      let args: Record<string, unknown>;
      try {
        args = contentType.startsWith('application/json')
          ? (JSON.parse(raw || '{}') as Record<string, unknown>)
          : Object.fromEntries(new URLSearchParams(raw));
      } catch {
        return send(200, { ok: false, error: 'invalid_json' });
      }
      const header = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
      const bodyToken = typeof args.token === 'string' ? args.token : undefined;
      const token = header ?? bodyToken;
      const { token: _dropped, client_secret: _secret, ...recorded } = args;
      const method = match[1];
      if (method === 'oauth.v2.access') {
        calls.push({ method, contentType, args: recorded, at: Date.now() });
        return send(200, oauth.access(args, req.headers.authorization));
      }
      calls.push({ method, token, tokenIn: header ? 'header' : bodyToken ? 'body' : undefined, contentType, args: recorded, at: Date.now() });
      if (!token) return send(200, { ok: false, error: 'not_authed' });
      if (!tokens.has(token)) return send(200, { ok: false, error: 'invalid_auth' });
      const answer = handle(method, recorded);
      if (method === 'chat.postMessage' && answer.body.ok) {
        posted.push({ channel: String(answer.body.channel), ts: String(answer.body.ts), args: recorded, token });
        for (const w of waiters) w();
      }
      send(answer.status ?? 200, answer.body, answer.headers);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const peer: SlackPeer = {
    url: `http://127.0.0.1:${port}/api/`,
    calls,
    posted,
    authorizations: oauth.authorizations,
    installs: oauth.installs,
    denyNextInstall: oauth.denyNext,
    callsOf: (method) => calls.filter((c) => c.method === method),
    fail(method, fault, times = 1) {
      const list = faults.get(method) ?? [];
      for (let i = 0; i < times; i++) list.push(fault);
      faults.set(method, list);
    },
    waitForPosts(count, timeoutMs = 15_000) {
      if (posted.length >= count) return Promise.resolve(posted.slice(0, count));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`slack peer: ${posted.length} of ${count} messages after ${timeoutMs} ms`));
        }, timeoutMs);
        const check = () => {
          if (posted.length < count) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(posted.slice(0, count));
        };
        waiters.add(check);
      });
    },
    reset() {
      calls.length = 0;
      posted.length = 0;
      faults.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return peer;
}
