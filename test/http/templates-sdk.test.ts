import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/** The official SDK's types, templates and components calls against the listening server. */
describe.each(STORAGE_KINDS)('pingram SDK: types, templates, components (%s)', (kind) => {
  let t: TestContext;
  let client: Pingram;

  beforeAll(async () => {
    t = await createTestContext(kind);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: `http://127.0.0.1:${address.port}` });
  });
  afterAll(() => t.close());

  it('types: create, get, list, update, delete', async () => {
    const created = await client.types.createNotificationType({ notificationId: 'sdk-welcome', title: 'Welcome', channels: ['EMAIL', 'SMS'] });
    expect(created).toMatchObject({ envId: t.account.clientId, notificationId: 'sdk-welcome', title: 'Welcome', channels: ['EMAIL', 'SMS'], enabled: true });

    const [one] = await client.types.getNotificationType('sdk-welcome');
    expect(one).toMatchObject({ notificationId: 'sdk-welcome', templates: [] });

    const options = {
      EMAIL: { defaultDeliveryOption: 'off', off: { enabled: true }, instant: { enabled: true }, weekly: { enabled: false, hour: '18:30', day: 'Friday' } },
      INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batching: false, batchingKey: 'parameters.postId', batchingWindow: 60000 } },
    } as const;
    const updated = await client.types.updateNotificationType('sdk-welcome', { title: 'Hello', enabled: false, options: options as never });
    expect(updated).toMatchObject({ title: 'Hello', enabled: false, options });
    const [reread] = await client.types.getNotificationType('sdk-welcome');
    expect(reread.options).toEqual(options);
    // Deduplication and throttling (test/sending/deduplication.test.ts, throttling.test.ts) read back as sent.
    const throttling = { max: 3, period: 1, unit: 'hours', forever: false, scope: ['userId', 'notificationId'] } as const;
    await client.types.updateNotificationType('sdk-welcome', { deduplication: { duration: 10 }, throttling: throttling as never });
    expect((await client.types.getNotificationType('sdk-welcome'))[0]).toMatchObject({ deduplication: { duration: 10 }, throttling });
    await expect(client.types.updateNotificationType('sdk-welcome', { deduplication: { duration: 0.5 } })).rejects.toMatchObject({ response: { status: 400 } });

    const list = await client.types.listNotificationTypes();
    expect(list.map((x) => x.notificationId)).toContain('sdk-welcome');

    await client.types.deleteNotificationType('sdk-welcome');
    await expect(client.types.getNotificationType('sdk-welcome')).rejects.toMatchObject({ response: { status: 404 } });
  });

  it('components and templates: create, get, list, update, default selection, referencedBy, delete', async () => {
    const component = await client.components.createComponent({ componentId: 'sdk-footer', name: 'Footer', html: '<footer>{{ brand }}</footer>' });
    expect(component).toMatchObject({ componentId: 'sdk-footer', name: 'Footer', internal: '', internalPage: '', channel: 'EMAIL', referencedBy: [] });

    const first = await client.templates.createTemplate('sdk-order', 'EMAIL', {
      templateId: 'v1',
      subject: 'Order {{ orderId }}',
      html: "<p>Thanks</p>{% component 'sdk-footer' %}",
      senderName: 'Shop',
    });
    expect(first).toMatchObject({ envId: t.account.clientId, notificationId: 'sdk-order', templateId: 'v1', channel: 'EMAIL', default: true });
    expect(first.isDefaultFor).toEqual({ instant: true, hourly: true, daily: true, weekly: true, monthly: true });

    const second = await client.templates.createTemplate('sdk-order', 'EMAIL', { templateId: 'v2', subject: 'Order v2', html: '<p>v2</p>' });
    expect(second.default).toBe(false);

    const got = await client.templates.getTemplate('sdk-order', 'EMAIL', 'v1');
    expect(got).toMatchObject({ templateId: 'v1', subject: 'Order {{ orderId }}', html: "<p>Thanks</p>{% component 'sdk-footer' %}", senderName: 'Shop' });

    const listed = await client.templates.listTemplates('sdk-order', 'EMAIL');
    expect(listed.map((x) => [x.templateId, x.default])).toEqual([
      ['v1', true],
      ['v2', false],
    ]);

    const patched = await client.templates.updateTemplate('sdk-order', 'EMAIL', 'v2', { subject: 'Order v2 (new)', html: "{% component 'sdk-footer' %}" });
    expect(patched).toMatchObject({ templateId: 'v2', default: false });
    expect((await client.templates.getTemplate('sdk-order', 'EMAIL', 'v2')).subject).toBe('Order v2 (new)');

    const chosen = await client.templates.setDefaultTemplate('sdk-order', 'EMAIL', { templateId: 'v2', modes: ['instant' as never] });
    expect(chosen).toMatchObject({ templateId: 'v2', default: true });
    expect((await client.templates.getTemplate('sdk-order', 'EMAIL', 'v1')).default).toBe(false);

    const withRefs = await client.components.getComponent('sdk-footer');
    expect(withRefs.referencedBy).toEqual([
      { notificationId: 'sdk-order', channel: 'EMAIL', templateId: 'v1' },
      { notificationId: 'sdk-order', channel: 'EMAIL', templateId: 'v2' },
    ]);
    expect((await client.components.listComponents('EMAIL')).map((c) => c.componentId)).toEqual(['sdk-footer']);
    await expect(client.components.deleteComponent('sdk-footer')).rejects.toMatchObject({ response: { status: 409 } });

    const renamed = await client.components.patchComponent('sdk-footer', { name: 'Site footer' });
    expect(renamed.name).toBe('Site footer');

    await client.templates.deleteTemplate('sdk-order', 'EMAIL', 'v2');
    expect((await client.templates.getTemplate('sdk-order', 'EMAIL', 'v1')).default).toBe(true);
    await client.templates.deleteTemplate('sdk-order', 'EMAIL', 'v1');
    expect(await client.templates.listTemplates('sdk-order', 'EMAIL')).toEqual([]);
    await client.components.deleteComponent('sdk-footer');
    expect(await client.components.listComponents('EMAIL')).toEqual([]);
  });

  it('templates of other channels round-trip through the SDK models', async () => {
    const inapp = await client.templates.createTemplate('sdk-multi', 'INAPP_WEB', {
      templateId: 'i',
      title: 'New {{ thing }}',
      redirectURL: 'https://example.com',
      instant: { title: 'now', imageURL: 'https://example.com/i.png' },
    });
    expect(inapp).toMatchObject({ channel: 'INAPP_WEB', default: true });
    const read = await client.templates.getTemplate('sdk-multi', 'INAPP_WEB', 'i');
    expect(read).toMatchObject({ title: 'New {{ thing }}', redirectURL: 'https://example.com', instant: { title: 'now', imageURL: 'https://example.com/i.png' } });

    await client.templates.createTemplate('sdk-multi', 'SLACK', { templateId: 's', text: 'hi', blocks: [{ type: 'divider' }], username: 'bot' });
    const [slack] = await client.templates.listTemplates('sdk-multi', 'SLACK');
    expect(slack).toMatchObject({ text: 'hi', blocks: [{ type: 'divider' }], username: 'bot' });
  });
});
