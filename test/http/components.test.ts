import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { componentResolver } from '../../src/modules/components/components.service.js';
import { TemplatesService } from '../../src/modules/templates/templates.service.js';
import { renderChannelContent } from '../../src/rendering/content.js';
import { LiquidRenderer, buildRenderContext } from '../../src/rendering/liquid.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('email components (%s)', (kind) => {
  let t: TestContext;
  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const refsOf = async (componentId: string) => (await req('GET', `/components/${componentId}`)).json().referencedBy;

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('creates, reads, lists, updates and deletes a component', async () => {
    const created = await req('POST', '/components', { componentId: 'header', name: 'Header', html: '<h1>{{ brand }}</h1>' });
    expect(created.statusCode).toBe(200);
    const c = created.json();
    expect(c).toMatchObject({
      envId: t.account.clientId,
      componentId: 'header',
      name: 'Header',
      internal: '',
      internalPage: '',
      html: '<h1>{{ brand }}</h1>',
      referencedBy: [],
      channel: 'EMAIL',
    });
    expect(Date.parse(c.createdAt)).not.toBeNaN();
    expect(c.modifiedAt).toBe(c.createdAt);

    expect((await req('GET', '/components/header')).json()).toEqual(c);
    const patched = await req('PATCH', '/components/header', { name: 'Top', internal: '{"rows":[]}', internalPage: 'p', html: '<h2>x</h2>' });
    expect(patched.json()).toMatchObject({ name: 'Top', internal: '{"rows":[]}', internalPage: 'p', html: '<h2>x</h2>' });

    await req('POST', '/components', { componentId: 'footer', name: 'Footer', html: '<footer/>' });
    const list = await req('GET', '/components?channel=EMAIL');
    expect(list.json().map((x: { componentId: string }) => x.componentId)).toEqual(['header', 'footer']);

    expect((await req('DELETE', '/components/footer')).statusCode).toBe(200);
    expect((await req('GET', '/components/footer')).statusCode).toBe(404);
    expect((await req('DELETE', '/components/footer')).json().error.code).toBe('NOT_FOUND');
  });

  it('refuses duplicates, bad ids, nested components and invalid Liquid', async () => {
    await req('POST', '/components', { componentId: 'dup', name: 'Dup' });
    const dup = await req('POST', '/components', { componentId: 'dup', name: 'Dup' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.code).toBe('CONFLICT');
    for (const body of [{ name: 'no id' }, { componentId: 'has space', name: 'x' }, { componentId: 'x' }, { componentId: 'x', name: 'x', html: "{% component 'dup' %}" }, { componentId: 'x', name: 'x', html: '{{ a | nope }}' }]) {
      const res = await req('POST', '/components', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await req('PATCH', '/components/dup', { html: '{% if %}' })).statusCode).toBe(400);
    expect((await req('PATCH', '/components/missing', { name: 'x' })).statusCode).toBe(404);
  });

  it('keeps referencedBy true across template create, update and delete', async () => {
    await req('POST', '/components', { componentId: 'logo', name: 'Logo', html: '<img alt="{{ brand }}">' });
    await req('POST', '/components', { componentId: 'legal', name: 'Legal', html: '<small>legal</small>' });
    const base = '/notifications/news/EMAIL/templates';

    expect((await req('POST', base, { templateId: 't1', subject: 's', html: "{% component 'logo' %}<p>1</p>" })).statusCode).toBe(200);
    expect((await req('POST', base, { templateId: 't2', subject: 's', html: "{% component 'logo' %}{% if x %}{% component 'legal' %}{% endif %}" })).statusCode).toBe(200);
    expect(await refsOf('logo')).toEqual([
      { notificationId: 'news', channel: 'EMAIL', templateId: 't1' },
      { notificationId: 'news', channel: 'EMAIL', templateId: 't2' },
    ]);
    expect(await refsOf('legal')).toEqual([{ notificationId: 'news', channel: 'EMAIL', templateId: 't2' }]);

    // Updating the html moves the references; updating another field keeps them.
    await req('PATCH', `${base}/t1`, { html: "{% component 'legal' %}" });
    expect(await refsOf('logo')).toEqual([{ notificationId: 'news', channel: 'EMAIL', templateId: 't2' }]);
    expect((await refsOf('legal')).map((r: { templateId: string }) => r.templateId)).toEqual(['t1', 't2']);
    await req('PATCH', `${base}/t1`, { subject: 'other' });
    expect((await refsOf('legal')).map((r: { templateId: string }) => r.templateId)).toEqual(['t1', 't2']);

    // The list shows the same references.
    const listed = (await req('GET', '/components')).json().find((x: { componentId: string }) => x.componentId === 'legal');
    expect(listed.referencedBy).toHaveLength(2);

    // Deleting a template, and deleting a whole type, drop their references.
    await req('DELETE', `${base}/t2`);
    expect(await refsOf('logo')).toEqual([]);
    expect(await refsOf('legal')).toEqual([{ notificationId: 'news', channel: 'EMAIL', templateId: 't1' }]);
    await req('DELETE', '/types/news');
    expect(await refsOf('legal')).toEqual([]);
  });

  it('refuses to delete a referenced component, naming the templates', async () => {
    await req('POST', '/components', { componentId: 'banner', name: 'Banner', html: '<div>b</div>' });
    await req('POST', '/notifications/promo/EMAIL/templates', { templateId: 'spring', subject: 's', html: "{% component 'banner' %}" });
    const res = await req('DELETE', '/components/banner');
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('CONFLICT');
    expect(res.json().error.message).toContain('promo/EMAIL/spring');
    expect(res.json().error.fix).toContain("{% component 'banner' %}");
    expect((await req('GET', '/components/banner')).statusCode).toBe(200);

    await req('PATCH', '/notifications/promo/EMAIL/templates/spring', { html: '<p>no banner</p>' });
    expect((await req('DELETE', '/components/banner')).statusCode).toBe(200);
  });

  it('refuses a template that references an unknown component', async () => {
    const res = await req('POST', '/notifications/x/EMAIL/templates', { templateId: 'a', subject: 's', html: "{% component 'ghost' %}" });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(res.json().error.message).toContain('"ghost"');
    expect(res.json().error.fix).toContain('POST /components');
    expect((await req('GET', '/notifications/x/EMAIL/templates/a')).statusCode).toBe(404);

    await req('POST', '/notifications/x/EMAIL/templates', { templateId: 'b', subject: 's', html: '<p/>' });
    const patch = await req('PATCH', '/notifications/x/EMAIL/templates/b', { html: "{% component 'ghost' %}" });
    expect(patch.statusCode).toBe(400);
    expect((await req('GET', '/notifications/x/EMAIL/templates/b')).json().html).toBe('<p/>');
  });

  it('renders a resolved template with its component at send time', async () => {
    await req('POST', '/components', { componentId: 'greet', name: 'Greet', html: '<h1>Hi {{ user.email }}</h1>' });
    await req('POST', '/notifications/render/EMAIL/templates', { templateId: 'main', subject: 'For {{ name }}', html: "{% component 'greet' %}<p>{{ name }}</p>", internal: 'x' });
    const a = t.account;
    const resolved = await new TemplatesService(t.deps).resolveTemplate(a.accountId, a.clientId, 'render', 'EMAIL');
    const renderer = new LiquidRenderer();
    const rendered = await renderChannelContent('EMAIL', resolved!.content, buildRenderContext({ name: '<b>Bo</b>' }, { id: 'u', email: 'bo@example.com' }), {
      renderer,
      resolveComponents: componentResolver(t.deps, a.accountId, a.clientId),
    });
    expect(rendered).toEqual({ subject: 'For <b>Bo</b>', html: '<h1>Hi bo@example.com</h1><p>&lt;b&gt;Bo&lt;/b&gt;</p>' });

    // Component edits apply to the next render.
    await req('PATCH', '/components/greet', { html: '<h1>Hello</h1>' });
    const again = await renderChannelContent('EMAIL', resolved!.content, buildRenderContext({ name: 'x' }, {}), {
      renderer,
      resolveComponents: componentResolver(t.deps, a.accountId, a.clientId),
    });
    expect(again.html).toBe('<h1>Hello</h1><p>x</p>');
  });

  it("is isolated per account: another account's key sees nothing and cannot use or change it", async () => {
    await req('POST', '/components', { componentId: 'mine', name: 'Mine', html: '<p>mine</p>' });
    const other = await t.newAccount();
    const theirs = { authorization: `Bearer ${other.apiKey}` };
    expect((await req('GET', '/components', undefined, theirs)).json()).toEqual([]);
    expect((await req('GET', '/components/mine', undefined, theirs)).statusCode).toBe(404);
    expect((await req('PATCH', '/components/mine', { name: 'x' }, theirs)).statusCode).toBe(404);
    expect((await req('DELETE', '/components/mine', undefined, theirs)).statusCode).toBe(404);
    // Their templates cannot reference our component.
    const res = await req('POST', '/notifications/n/EMAIL/templates', { templateId: 'a', html: "{% component 'mine' %}" }, theirs);
    expect(res.statusCode).toBe(400);
    expect((await componentResolver(t.deps, other.accountId, other.clientId)(['mine'])).size).toBe(0);
    expect((await req('GET', '/components/mine')).json().name).toBe('Mine');
  });
});
