import { createECDH, randomBytes } from 'node:crypto';
import type { TestContext } from '../helpers/context.js';

type Headers = Record<string, string>;

/** Thin inject wrappers for the users routes. */
export function usersApi(t: TestContext) {
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Headers = t.auth, payload?: unknown) => {
    const res = await t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
    return { status: res.statusCode, body: res.json() };
  };
  return {
    identify: (id: string, body: unknown, headers?: Headers) => call('POST', `/users/${encodeURIComponent(id)}`, headers, body),
    get: (id: string, headers?: Headers) => call('GET', `/users/${encodeURIComponent(id)}`, headers),
    list: (query = '', headers?: Headers) => call('GET', `/users${query}`, headers),
    remove: (id: string, headers?: Headers) => call('DELETE', `/users/${encodeURIComponent(id)}`, headers),
    unsuppress: (id: string, channel: string, headers?: Headers, query = '') =>
      call('DELETE', `/user_suppression/${encodeURIComponent(id)}/channel/${channel}${query}`, headers),
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A real browser-like push subscription: a P-256 public key and a 16-byte auth secret. */
export function webPushSubscription(endpoint = 'https://push.example.com/send/abc') {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { sub: { endpoint, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') } } };
}

export const fcmToken = (token = 'fcm-token-1', deviceId = 'pixel-1') => ({ type: 'FCM', token, device: { device_id: deviceId } });
