import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafeFetchError, blockedReason, safeFetch } from '../../src/net/ssrf.js';

let server: http.Server;
let base: string;
let port: number;
const hits: string[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/hello') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`hello from ${req.headers.host}`);
    } else if (url.pathname === '/big') {
      // Chunked, no Content-Length: the cap must hold while streaming.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      for (let i = 0; i < 64; i++) res.write(Buffer.alloc(1024, 1));
      res.end();
    } else if (url.pathname === '/declared-big') {
      res.writeHead(200, { 'content-length': String(10_000_000) });
      res.write('x');
      // never finishes: the declared length alone must fail it
    } else if (url.pathname === '/redirect') {
      res.writeHead(302, { location: url.searchParams.get('to') ?? '/hello' });
      res.end();
    } else if (url.pathname === '/loop') {
      res.writeHead(301, { location: '/loop' });
      res.end();
    } else {
      res.writeHead(404);
      res.end('missing');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function refusal(promise: Promise<unknown>): Promise<SafeFetchError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(SafeFetchError);
    return err as SafeFetchError;
  }
  throw new Error('expected the fetch to be refused');
}

const opts = { maxBytes: 1_000_000, timeoutMs: 5000 };

describe('blockedReason', () => {
  it.each([
    '127.0.0.1',
    '127.9.9.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '100.127.255.254',
    '169.254.169.254',
    '::1',
    '[::1]',
    'fd00::1',
    'fe80::1',
    '::ffff:127.0.0.1',
    '::ffff:a9fe:a9fe',
    '0.0.0.0',
    '::',
    '224.0.0.1',
    'ff02::1',
    '255.255.255.255',
  ])('refuses %s', (ip) => {
    expect(blockedReason(ip)).toBeDefined();
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111'])('allows public %s', (ip) => {
    expect(blockedReason(ip)).toBeUndefined();
  });

  it('allowPrivateNetworks lets private through but never unspecified or multicast', () => {
    expect(blockedReason('127.0.0.1', true)).toBeUndefined();
    expect(blockedReason('169.254.169.254', true)).toBeUndefined();
    expect(blockedReason('0.0.0.0', true)).toBeDefined();
    expect(blockedReason('239.1.1.1', true)).toBeDefined();
  });
});

describe('blockedReason: IPv4 inside IPv6, and only global unicast IPv6', () => {
  // [address, refused without allowPrivateNetworks, refused even with it]
  it.each([
    // IPv4-mapped ::ffff:0:0/96
    ['::ffff:127.0.0.1', true, false],
    ['::ffff:7f00:1', true, false],
    ['::ffff:8.8.8.8', false, false],
    // IPv4-compatible ::/96
    ['::127.0.0.1', true, false],
    ['::7f00:1', true, false],
    ['::a9fe:a9fe', true, false],
    ['::8.8.8.8', false, false],
    // SIIT ::ffff:0:0:0/96
    ['::ffff:0:127.0.0.1', true, false],
    ['::ffff:0:7f00:1', true, false],
    ['::ffff:0:a00:1', true, false],
    ['::ffff:0:808:808', false, false],
    // NAT64 well-known 64:ff9b::/96
    ['64:ff9b::127.0.0.1', true, false],
    ['64:ff9b::a9fe:a9fe', true, false],
    ['64:ff9b::808:808', false, false],
    // NAT64 local-use 64:ff9b:1::/48 is routed locally by definition
    ['64:ff9b:1::808:808', true, false],
    ['64:ff9b:1:7f00:1::', true, false],
    // 6to4 2002::/16, IPv4 in bits 16-48
    ['2002:7f00:1::', true, false],
    ['2002:a9fe:a9fe::1', true, false],
    ['2002:c0a8:101::1', true, false],
    ['2002:808:808::1', false, false],
    // Teredo 2001::/32: server in bits 32-64, client XOR 0xffff in the last 32 bits
    ['2001:0:808:808:0:0:80ff:fffe', true, false], // client 127.0.0.1
    ['2001:0:808:808:0:0:5601:5601', true, false], // client 169.254.169.254
    ['2001:0:a00:1:0:0:f7f7:f7f7', true, false], // server 10.0.0.1
    ['2001:0:808:808:0:0:f7f7:f7f7', false, false], // server and client 8.8.8.8
    // non-global IPv6
    ['fc00::1', true, false],
    ['fd12:3456::1', true, false],
    ['fe80::1', true, false],
    ['fe80::1%eth0', true, false],
    ['fec0::1', true, false],
    ['2001:db8::1', true, false],
    ['100::1', true, false],
    ['2001:10::1', true, false],
    ['2001:20::1', true, false],
    ['2001:2::1', true, false],
    ['3fff::1', true, false],
    ['4000::1', true, false],
    ['::1', true, false],
    ['ff02::1', true, true],
    ['ff05::2', true, true],
    ['::', true, true],
    ['::ffff:0.0.0.0', true, true],
    ['::ffff:224.0.0.1', true, true],
    ['::2', true, true], // IPv4-compatible 0.0.0.2
    // global unicast
    ['2606:4700:4700::1111', false, false],
    ['2a00:1450:4001:80b::200e', false, false],
    ['[2001:4860:4860::8888]', false, false],
  ])('%s: refused %s, refused with allowPrivateNetworks %s', (ip, refused, refusedWhenPrivateAllowed) => {
    expect(blockedReason(ip) !== undefined).toBe(refused);
    expect(blockedReason(ip, true) !== undefined).toBe(refusedWhenPrivateAllowed);
  });

  it('names the IPv4 it found inside', () => {
    expect(blockedReason('2002:a9fe:a9fe::1')).toMatch(/169\.254\.169\.254 inside 2002:a9fe:a9fe::1/);
  });

  it('allowAddresses lets one internal address through in its IPv4 form', () => {
    expect(blockedReason('::ffff:10.0.0.7', false, ['10.0.0.7'])).toBeUndefined();
    expect(blockedReason('::ffff:10.0.0.8', false, ['10.0.0.7'])).toBeDefined();
    expect(blockedReason('fd00::7', false, ['fd00::7'])).toBeUndefined();
  });
});

describe('safeFetch', () => {
  it.each([
    ['loopback', 'http://127.0.0.1:1/x'],
    ['RFC 1918', 'http://10.0.0.5/x'],
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data/'],
    ['IPv6 loopback', 'http://[::1]:1/x'],
    ['CGNAT', 'http://100.64.1.1/x'],
  ])('refuses %s targets before connecting', async (_name, url) => {
    const err = await refusal(safeFetch(url, opts));
    expect(err.code).toBe('ADDRESS_BLOCKED');
  });

  it('refuses a hostname that resolves to loopback', async () => {
    const before = hits.length;
    const err = await refusal(safeFetch(`http://localhost:${port}/hello`, opts));
    expect(err.code).toBe('ADDRESS_BLOCKED');
    expect(err.message).toMatch(/localhost resolves to a loopback/);
    // Which address a name has is not told to the caller.
    expect(err.message).not.toMatch(/127\.0\.0\.1|::1/);
    expect(hits.length).toBe(before);
  });

  it('refuses a hostname when any of its addresses is internal', async () => {
    const lookup = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: '10.0.0.1', family: 4 },
    ];
    expect((await refusal(safeFetch('http://mixed.example/x', { ...opts, lookup }))).code).toBe('ADDRESS_BLOCKED');
  });

  it('refuses non-http protocols and junk', async () => {
    expect((await refusal(safeFetch('file:///etc/passwd', opts))).code).toBe('PROTOCOL_NOT_ALLOWED');
    expect((await refusal(safeFetch('gopher://example.com/', opts))).code).toBe('PROTOCOL_NOT_ALLOWED');
    expect((await refusal(safeFetch('not a url', opts))).code).toBe('URL_INVALID');
  });

  it('allows loopback with allowPrivateNetworks', async () => {
    const res = await safeFetch(`${base}/hello`, { ...opts, allowPrivateNetworks: true });
    expect(res.status).toBe(200);
    expect(res.contentType).toBe('text/plain');
    expect(res.body.toString()).toBe(`hello from 127.0.0.1:${port}`);
  });

  it('connects to the address it checked, not to whatever the name resolves to later', async () => {
    // "pinned.invalid" does not exist in DNS; the checked answer from our resolver is used for the
    // connection itself, while the Host header still names the host.
    let calls = 0;
    const lookup = async () => {
      calls++;
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const res = await safeFetch(`http://pinned.invalid:${port}/hello`, { ...opts, allowPrivateNetworks: true, lookup });
    expect(res.body.toString()).toBe(`hello from pinned.invalid:${port}`);
    expect(calls).toBe(1);
  });

  it('re-checks every redirect and refuses one to a private address', async () => {
    const allowAddresses = ['127.0.0.1'];
    const ok = await safeFetch(`${base}/redirect?to=/hello`, { ...opts, allowAddresses });
    expect(ok.status).toBe(200);
    expect(ok.url).toBe(`${base}/hello`);

    for (const target of ['http://10.0.0.1/', 'http://169.254.169.254/latest/meta-data/', `http://127.0.0.2:${port}/hello`]) {
      const err = await refusal(safeFetch(`${base}/redirect?to=${encodeURIComponent(target)}`, { ...opts, allowAddresses }));
      expect(err.code).toBe('ADDRESS_BLOCKED');
      expect(err.url).toBe(new URL(target).href);
    }
  });

  it('follows at most maxRedirects redirects', async () => {
    const err = await refusal(safeFetch(`${base}/loop`, { ...opts, allowPrivateNetworks: true, maxRedirects: 2 }));
    expect(err.code).toBe('TOO_MANY_REDIRECTS');
  });

  it('enforces maxBytes while streaming and on a declared length', async () => {
    const small = await safeFetch(`${base}/big`, { ...opts, allowPrivateNetworks: true, maxBytes: 64 * 1024 });
    expect(small.body.length).toBe(64 * 1024);
    const err = await refusal(safeFetch(`${base}/big`, { ...opts, allowPrivateNetworks: true, maxBytes: 64 * 1024 - 1 }));
    expect(err.code).toBe('TOO_LARGE');
    const declared = await refusal(safeFetch(`${base}/declared-big`, { ...opts, allowPrivateNetworks: true, maxBytes: 1000 }));
    expect(declared.code).toBe('TOO_LARGE');
  });

  it('returns non-2xx statuses for the caller to judge', async () => {
    const res = await safeFetch(`${base}/nope`, { ...opts, allowPrivateNetworks: true });
    expect(res.status).toBe(404);
  });

  it('reports a refused connection as NETWORK', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await refusal(safeFetch(`http://127.0.0.1:${freePort}/`, { ...opts, allowPrivateNetworks: true }));
    expect(err.code).toBe('NETWORK');
  });
});
