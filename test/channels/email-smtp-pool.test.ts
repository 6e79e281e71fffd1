import { afterEach, describe, expect, it } from 'vitest';
import { SmtpPool, type SmtpPoolOptions } from '../../src/channels/email/smtp-pool.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';

const mime = (i: number, to = 'ada@example.test') =>
  Buffer.from(`From: team@clarion.test\r\nTo: ${to}\r\nSubject: m${i}\r\nMessage-ID: <m${i}@clarion.test>\r\n\r\nHello ${i}\r\n`);

describe('SmtpPool against a local SMTP server', () => {
  let peer: SmtpPeer;
  let pool: SmtpPool;
  afterEach(async () => {
    pool?.close();
    await peer?.close();
  });

  const open = (options: Partial<SmtpPoolOptions> = {}) =>
    new SmtpPool({ connection: { host: '127.0.0.1', port: peer.port, secure: false, ignoreTLS: true }, maxConnections: 5, maxMessages: 100, ...options });

  it('sends each message with its envelope and answers the server reply', async () => {
    peer = await startSmtpPeer();
    pool = open();
    const info = await pool.send({ from: 'team@clarion.test', to: ['ada@example.test', 'bob@example.test'] }, mime(1));
    expect(info.response).toMatch(/^250 /);
    expect(info.accepted).toEqual(['ada@example.test', 'bob@example.test']);
    const [got] = await peer.waitFor(1);
    expect(got.envelope).toEqual({ from: 'team@clarion.test', to: ['ada@example.test', 'bob@example.test'] });
    expect(got.parsed.messageId).toBe('<m1@clarion.test>');
  });

  it('opens at most maxConnections, and every message waiting gets sent', async () => {
    peer = await startSmtpPeer();
    pool = open({ maxConnections: 3 });
    await Promise.all(Array.from({ length: 12 }, (_, i) => pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(i))));
    const got = await peer.waitFor(12);
    expect(new Set(got.map((m) => m.parsed.messageId)).size).toBe(12);
    expect(peer.connections).toBeLessThanOrEqual(3);
  });

  it('replaces a connection once it sent maxMessages', async () => {
    peer = await startSmtpPeer();
    pool = open({ maxMessages: 2 });
    for (let i = 0; i < 5; i++) await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(i));
    const got = await peer.waitFor(5);
    expect(got.map((m) => m.connectionId).filter((id, i, all) => all.indexOf(id) === i)).toHaveLength(3);
  });

  it('keeps the connection after the server refused a recipient (RSET), and sends the next message on it', async () => {
    peer = await startSmtpPeer({ reject: { 'gone@example.test': 550 } });
    pool = open();
    const err = (await pool.send({ from: 'team@clarion.test', to: ['gone@example.test'] }, mime(1, 'gone@example.test')).catch((e: unknown) => e)) as { code?: string; responseCode?: number };
    expect(err.code).toBe('EENVELOPE');
    await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(2));
    await peer.waitFor(1);
    expect(peer.connections).toBe(1);
  });

  it('sends on a new connection after the server ended the idle one', async () => {
    peer = await startSmtpPeer();
    pool = open();
    await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(1));
    peer.dropConnections();
    await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(2));
    const got = await peer.waitFor(2);
    expect(got.map((m) => m.parsed.messageId)).toEqual(['<m1@clarion.test>', '<m2@clarion.test>']);
    expect(peer.connections).toBe(2);
  });

  it('fails a send when it cannot connect, and refuses sends once closed', async () => {
    peer = await startSmtpPeer();
    const port = peer.port;
    await peer.close();
    pool = new SmtpPool({ connection: { host: '127.0.0.1', port, secure: false, connectionTimeout: 2000 }, maxConnections: 2, maxMessages: 100 });
    const down = (await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(1)).catch((e: unknown) => e)) as { code?: string };
    expect(down.code).toBe('ESOCKET');
    pool.close();
    const closed = (await pool.send({ from: 'team@clarion.test', to: ['ada@example.test'] }, mime(2)).catch((e: unknown) => e)) as { code?: string };
    expect(closed.code).toBe('ECONNECTION');
    peer = await startSmtpPeer();
  });
});
