import { describe, expect, it } from 'vitest';
import { type RoutingInput, routeChannels } from '../../src/modules/sending/routing.js';

const ALL = ['EMAIL', 'INAPP_WEB', 'SMS', 'CALL', 'PUSH', 'WEB_PUSH', 'SLACK'] as const;

function input(overrides: Partial<RoutingInput> = {}): RoutingInput {
  return {
    withContent: new Set(['EMAIL', 'INAPP_WEB']),
    type: { enabled: true, channels: [...ALL] },
    user: { email: 'a@example.com', suppressed: new Set() },
    disabledForEnvironment: [],
    available: new Set(ALL),
    ...overrides,
  };
}

const decision = (decisions: ReturnType<typeof routeChannels>, channel: string) => decisions.find((d) => d.channel === channel)!;

describe('channel routing', () => {
  it('sends on every channel with content and a reachable user, and says why not elsewhere', () => {
    const d = routeChannels(input());
    expect(decision(d, 'EMAIL')).toEqual({ channel: 'EMAIL', routing: 'SEND' });
    expect(decision(d, 'INAPP_WEB')).toEqual({ channel: 'INAPP_WEB', routing: 'SEND' });
    expect(decision(d, 'SMS')).toEqual({ channel: 'SMS', routing: 'SKIP', reason: 'NO_CONTENT' });
    expect(d).toHaveLength(7);
  });

  it('names the missing contact data per channel', () => {
    const d = routeChannels(input({ withContent: new Set(ALL), user: { suppressed: new Set() } }));
    expect(Object.fromEntries(d.map((x) => [x.channel, x.routing === 'SKIP' ? x.reason : 'SEND']))).toEqual({
      EMAIL: 'NO_EMAIL',
      INAPP_WEB: 'SEND',
      SMS: 'NO_NUMBER',
      CALL: 'NO_NUMBER',
      PUSH: 'NO_PUSH_TOKENS',
      WEB_PUSH: 'NO_WEB_PUSH_SUBSCRIPTION',
      SLACK: 'NO_SLACK_DESTINATION',
    });
  });

  it('skips suppressed users, environment-disabled and unavailable channels', () => {
    expect(decision(routeChannels(input({ user: { email: 'a@x.io', suppressed: new Set(['EMAIL']) } })), 'EMAIL')).toMatchObject({ reason: 'USER_SUPPRESSED' });
    expect(decision(routeChannels(input({ disabledForEnvironment: ['EMAIL'] })), 'EMAIL')).toMatchObject({ reason: 'DISABLED_FOR_ENVIRONMENT' });
    expect(decision(routeChannels(input({ available: new Set(['INAPP_WEB']) })), 'EMAIL')).toMatchObject({ reason: 'CHANNEL_UNAVAILABLE' });
  });

  it('skips a channel the user turned off for the type, even when forced, and only that channel', () => {
    const off = input({ user: { email: 'a@x.io', suppressed: new Set(), off: new Set(['email']) } });
    expect(decision(routeChannels(off), 'EMAIL')).toEqual({ channel: 'EMAIL', routing: 'SKIP', reason: 'USER_UNSUBSCRIBED' });
    expect(decision(routeChannels({ ...off, forceChannels: ['EMAIL'] }), 'EMAIL')).toMatchObject({ reason: 'USER_UNSUBSCRIBED' });
    expect(decision(routeChannels(off), 'INAPP_WEB')).toEqual({ channel: 'INAPP_WEB', routing: 'SEND' });
  });

  it("skips a channel off by the type's default, unless forceChannels bypasses it; the user's own off wins over both", () => {
    const byDefault = input({ user: { email: 'a@x.io', suppressed: new Set(), offByDefault: new Set(['email']) } });
    expect(decision(routeChannels(byDefault), 'EMAIL')).toEqual({ channel: 'EMAIL', routing: 'SKIP', reason: 'OFF_BY_DEFAULT' });
    expect(decision(routeChannels({ ...byDefault, forceChannels: ['EMAIL'] }), 'EMAIL')).toEqual({ channel: 'EMAIL', routing: 'SEND' });
    expect(decision(routeChannels(byDefault), 'INAPP_WEB')).toEqual({ channel: 'INAPP_WEB', routing: 'SEND' });
  });

  it('honours the type configuration unless forceChannels bypasses it', () => {
    const typed = input({ type: { enabled: true, channels: ['INAPP_WEB'] } });
    expect(decision(routeChannels(typed), 'EMAIL')).toMatchObject({ reason: 'CHANNEL_NOT_CONFIGURED_FOR_TYPE' });
    expect(decision(routeChannels({ ...typed, forceChannels: ['EMAIL'] }), 'EMAIL')).toEqual({ channel: 'EMAIL', routing: 'SEND' });
    expect(decision(routeChannels({ ...typed, forceChannels: ['EMAIL'] }), 'INAPP_WEB')).toMatchObject({ reason: 'NOT_IN_FORCE_CHANNELS' });
    expect(decision(routeChannels(input({ type: { enabled: false, channels: [...ALL] } })), 'EMAIL')).toMatchObject({ reason: 'NOTIFICATION_DISABLED' });
  });
});
