import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type PeerAuthorization, slackOauthPeer } from './slack-oauth-peer.js';

export type { PeerAuthorization } from './slack-oauth-peer.js';

/**
 * A local Slack Web API: POST /api/<method> with form-urlencoded or JSON bodies, bearer tokens
 * (header, or `token` in the body as Slack also accepts), `{ok: false, error}` answers with
 * HTTP 200 as Slack gives them, and 429 + Retry-After for rate limits. It keeps a small
 * workspace (channels, users, DM conversations) and the messages posted (with their metadata),
 * answers conversations.history / conversations.replies as Slack does (newest first, paged,
 * metadata only with include_all_metadata), and records every call as received.
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

/**
 * `{ error }`: answered `{ok: false, error}`; `{ ratelimited }`: 429. `{ posted, answer }` (chat.postMessage):
 * the message is kept (`posted: true`) or not, and the call is answered HTTP 500 or never (`hang`: the
 * client gives up on its own timeout), the outcomes a sender cannot tell apart.
 */
export type PeerFault = { error: string } | { ratelimited: number | null } | { posted: boolean; answer: 'hang' | 500 };

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
  /** Milliseconds since the epoch, for message ts (a test's injected clock); default Date.now. */
  now?: () => number;
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

type Answer = { status?: number; headers?: Record<string, string>; body: Record<string, unknown>; hang?: boolean };

export async function startSlackPeer(options: SlackPeerOptions): Promise<SlackPeer> {
  const tokens = new Set(options.tokens);
  const channels = options.channels ?? [];
  const users = options.users ?? [];
  const maxPage = options.maxPageSize ?? 2;
  const team = options.team ?? { id: 'T0PEER', name: 'Peer workspace' };
  const calls: SlackCall[] = [];
  const posted: SlackPeer['posted'] = [];
  const now = options.now ?? Date.now;
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

  /** A conversation id the bot may read, or the error Slack gives. */
  const readable = (id: string): string | undefined => {
    const channel = channels.find((c) => c.id === id);
    if (channel) return channel.notMember ? 'not_in_channel' : undefined;
    return [...dms.values()].includes(id) ? undefined : 'channel_not_found';
  };

  /** A kept message as conversations.history / replies answer it; metadata only with include_all_metadata. */
  const historyMessage = (m: SlackPeer['posted'][number], withMetadata: boolean) => {
    const metadata = typeof m.args.metadata === 'string' ? (JSON.parse(m.args.metadata) as unknown) : m.args.metadata;
    return {
      type: 'message',
      subtype: 'bot_message',
      text: argText(m.args.text),
      ts: m.ts,
      bot_id: 'BBOT',
      app_id: 'APEER',
      ...(m.args.thread_ts ? { thread_ts: argText(m.args.thread_ts) } : {}),
      ...(withMetadata && metadata ? { metadata } : {}),
    };
  };

  /** Messages within oldest / latest (Slack's `inclusive` applies to both bounds). */
  const within = (ts: string, args: Record<string, unknown>) => {
    const inclusive = args.inclusive === true || args.inclusive === 'true' || args.inclusive === '1';
    const t = Number(ts);
    const oldest = args.oldest ? Number(argText(args.oldest)) : -Infinity;
    const latest = args.latest ? Number(argText(args.latest)) : Infinity;
    return (inclusive ? t >= oldest : t > oldest) && (inclusive ? t <= latest : t < latest);
  };

  function handle(method: string, args: Record<string, unknown>, token?: string): Answer {
    const fault = faults.get(method)?.shift();
    if (fault) {
      if ('ratelimited' in fault) {
        return { status: 429, headers: fault.ratelimited === null ? {} : { 'retry-after': String(fault.ratelimited) }, body: { ok: false, error: 'ratelimited' } };
      }
      if ('posted' in fault) {
        if (fault.posted) answer(method, args, token);
        return fault.answer === 'hang' ? { hang: true, body: {} } : { status: 500, body: { ok: false, error: 'internal_server_error' } };
      }
      return { body: { ok: false, error: fault.error } };
    }
    return answer(method, args, token);
  }

  function answer(method: string, args: Record<string, unknown>, token?: string): Answer {
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
        const ts = `${Math.floor(now() / 1000)}.${String(seq).padStart(6, '0')}`;
        posted.push({ channel: id, ts, args, token });
        for (const w of waiters) w();
        return { body: { ok: true, channel: id, ts, message: { type: 'message', text: args.text, ts, bot_id: 'BBOT' } } };
      }
      case 'conversations.history': {
        const id = argText(args.channel);
        const refused = readable(id);
        if (refused) return { body: { ok: false, error: refused } };
        const withMetadata = args.include_all_metadata === true || args.include_all_metadata === 'true' || args.include_all_metadata === '1';
        // Newest first; thread replies stay in their thread unless broadcast.
        const inChannel = posted.filter((m) => m.channel === id && (!m.args.thread_ts || argText(m.args.reply_broadcast) === 'true') && within(m.ts, args)).reverse();
        const { page, next } = paged(inChannel, args);
        return { body: { ok: true, messages: page.map((m) => historyMessage(m, withMetadata)), has_more: next !== '', pin_count: 0, response_metadata: { next_cursor: next } } };
      }
      case 'conversations.replies': {
        const id = argText(args.channel);
        const refused = readable(id);
        if (refused) return { body: { ok: false, error: refused } };
        const parent = argText(args.ts);
        const withMetadata = args.include_all_metadata === true || args.include_all_metadata === 'true' || args.include_all_metadata === '1';
        const thread = posted.filter((m) => m.channel === id && (m.ts === parent || argText(m.args.thread_ts) === parent) && within(m.ts, args));
        const { page, next } = paged(thread, args);
        return { body: { ok: true, messages: page.map((m) => historyMessage(m, withMetadata)), has_more: next !== '', response_metadata: { next_cursor: next } } };
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
      const answered = handle(method, recorded, token);
      // Never answered: the client gives up; closing the peer ends the connection.
      if (answered.hang) return;
      send(answered.status ?? 200, answered.body, answered.headers);
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
