import { expect } from 'vitest';

type Inject = (method: 'POST' | 'PATCH', url: string, payload: unknown) => Promise<{ statusCode: number; body: string; json(): { error: { code: string; message: string; fix?: unknown } } }>;

/**
 * Each case's settings are refused with 400 VALIDATION_FAILED naming `named` (and a fix) on
 * POST /types (type `refused`) and on PATCH /types/kept; the caller checks that nothing was stored.
 */
export async function expectTypeSettingsRefused(req: Inject, cases: [what: string, settings: Record<string, unknown>, named: string][]): Promise<void> {
  for (const [what, settings, named] of cases) {
    const created = await req('POST', '/types', { notificationId: 'refused', title: 'x', channels: ['EMAIL'], ...settings });
    expect(created.statusCode, `${what}: ${created.body}`).toBe(400);
    expect(created.json().error.code).toBe('VALIDATION_FAILED');
    expect(created.json().error.message, what).toContain(named);
    expect(typeof created.json().error.fix, what).toBe('string');
    const patched = await req('PATCH', '/types/kept', settings);
    expect(patched.statusCode, `${what} (patch): ${patched.body}`).toBe(400);
    expect(patched.json().error.message, what).toContain(named);
  }
}
