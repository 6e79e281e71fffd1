import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('inbound email settings', () => {
  it('defaults to port 2525, the inbound.localhost domain and 10 MB', () => {
    const config = loadConfig({});
    expect(config.inboundSmtpPort).toBe(2525);
    expect(config.inboundDomain).toBe('inbound.localhost');
    expect(config.inboundMaxBytes).toBe(10 * 1024 * 1024);
    expect(config.inboundSmtpHost).toBe('127.0.0.1');
  });

  it('turns the server off with 0 or off, and takes a port, host, domain and size', () => {
    expect(loadConfig({ CLARION_INBOUND_SMTP_PORT: '0' }).inboundSmtpPort).toBeNull();
    expect(loadConfig({ CLARION_INBOUND_SMTP_PORT: 'off' }).inboundSmtpPort).toBeNull();
    const config = loadConfig({ CLARION_INBOUND_SMTP_PORT: '25', HOST: '0.0.0.0', CLARION_INBOUND_DOMAIN: 'Mail.Example.com', CLARION_INBOUND_MAX_BYTES: '2048' });
    expect(config).toMatchObject({ inboundSmtpPort: 25, inboundSmtpHost: '0.0.0.0', inboundDomain: 'mail.example.com', inboundMaxBytes: 2048 });
    expect(loadConfig({ HOST: '0.0.0.0', CLARION_INBOUND_SMTP_HOST: '127.0.0.1' }).inboundSmtpHost).toBe('127.0.0.1');
  });

  it('refuses bad values with a clear message', () => {
    expect(() => loadConfig({ CLARION_INBOUND_SMTP_PORT: 'smtp' })).toThrow(ConfigError);
    expect(() => loadConfig({ CLARION_INBOUND_SMTP_PORT: '70000' })).toThrow(/CLARION_INBOUND_SMTP_PORT/);
    expect(() => loadConfig({ CLARION_INBOUND_DOMAIN: 'not a domain' })).toThrow(/CLARION_INBOUND_DOMAIN must be a domain name/);
  });
});
