// Template writes that race on PostgreSQL (SQLite serializes its writers, so there the same
// requests only check the outcome): concurrent PATCHes of one template keep every change,
// deletes and default selection of one type keep "each delivery mode has exactly one default
// template" and answer 200 or 404 (a template deleted meanwhile), never a deadlock's 500 or a
// component error, and a template created while its type is being deleted recreates the type.
// The postgres-only tests stop the requests at a chosen statement behind a lock held by a session
// of the test (LockHolder), so the interleaving that lost data is the one that runs, every time.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERY_MODES } from '../../src/modules/templates/template-fields.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { LockHolder } from './pg-lock-holder.js';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
interface Listed {
  templateId: string;
  subject?: string;
  html?: string;
  isDefaultFor: Record<string, boolean>;
}

function requests(t: () => TestContext) {
  const req = (method: Method, url: string, payload?: unknown) =>
    t().app.inject({ method, url, headers: t().auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  /** The default template of each delivery mode, as GET .../templates lists them; a mode with none or with several is reported as such. */
  const defaultsOf = async (type: string): Promise<{ templates: string[]; defaults: Record<string, string[]> }> => {
    const listed = (await req('GET', `/notifications/${type}/EMAIL/templates`)).json<Listed[]>();
    const defaults = Object.fromEntries(DELIVERY_MODES.map((mode) => [mode, listed.filter((x) => x.isDefaultFor[mode]).map((x) => x.templateId)]));
    return { templates: listed.map((x) => x.templateId), defaults };
  };
  const createAll = async (type: string, ids: string[]) => {
    for (const id of ids) {
      const res = await req('POST', `/notifications/${type}/EMAIL/templates`, { templateId: id, subject: id, html: `<p>${id}</p>` });
      expect(res.statusCode, res.body).toBe(200);
    }
  };
  return { req, defaultsOf, createAll };
}

const everyMode = (templateId: string) => Object.fromEntries(DELIVERY_MODES.map((mode) => [mode, [templateId]]));

describe.each(STORAGE_KINDS)('concurrent template writes (%s)', (kind) => {
  let t: TestContext;
  const { req, defaultsOf, createAll } = requests(() => t);

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('keeps both fields of two PATCHes of one template sent together', async () => {
    for (let round = 0; round < 10; round++) {
      const type = `patch-${round}`;
      await createAll(type, ['tp']);
      const url = `/notifications/${type}/EMAIL/templates/tp`;
      const answers = await Promise.all([req('PATCH', url, { subject: 's1' }), req('PATCH', url, { html: 'h1' })]);
      for (const a of answers) expect(a.statusCode, a.body).toBe(200);
      expect((await req('GET', url)).json(), `round ${round}`).toMatchObject({ subject: 's1', html: 'h1' });
    }
  });

  it('deletes and default selection sent together: 200 or 404 each, and every mode keeps exactly one default', async () => {
    // The report's requests, with a fourth template that stays, so that the rule has something to hold for.
    for (let round = 0; round < 12; round++) {
      const type = `select-${round}`;
      await createAll(type, ['a', 'b', 'c', 'd']);
      const base = `/notifications/${type}/EMAIL/templates`;
      const [delA, delB, delC, selectB, selectC] = await Promise.all([
        req('DELETE', `${base}/a`),
        req('DELETE', `${base}/b`),
        req('DELETE', `${base}/c`),
        req('PATCH', `${base}/default-selection`, { templateId: 'b', modes: ['instant', 'daily'] }),
        req('PATCH', `${base}/default-selection`, { templateId: 'c', modes: ['hourly'] }),
      ]);
      for (const del of [delA, delB, delC]) expect(del.statusCode, `round ${round}: ${del.body}`).toBe(200);
      for (const select of [selectB, selectC]) {
        if (select.statusCode !== 200) expectErrorBody(select, 404, 'NOT_FOUND', /Template/);
      }
      expect(await defaultsOf(type), `round ${round}`).toEqual({ templates: ['d'], defaults: everyMode('d') });
    }
  });
});

describe.runIf(STORAGE_KINDS.includes('postgres'))('template writes interleaved behind a held lock (postgres)', () => {
  let t: TestContext;
  let holder: LockHolder | undefined;
  const { req, defaultsOf, createAll } = requests(() => t);
  const lockTemplate = (type: string, templateId: string) =>
    LockHolder.hold(t.storage, {
      text: 'select 1 from templates where env_id = $1 and notification_id = $2 and template_id = $3 for update',
      values: [t.account.clientId, type, templateId],
    });

  beforeAll(async () => {
    t = await createTestContext('postgres');
  });
  afterEach(async () => {
    await holder?.close();
    holder = undefined;
  });
  afterAll(() => t.close());

  it('two PATCHes held at once behind a lock on the template (the old code read it in both before either wrote): both changes are kept', async () => {
    await createAll('held-patch', ['tp']);
    const url = '/notifications/held-patch/EMAIL/templates/tp';
    // The held row lock stops each PATCH before it writes (or, locking, before it reads).
    holder = await lockTemplate('held-patch', 'tp');
    const subject = req('PATCH', url, { subject: 's1' });
    await holder.waitForBlocked(1);
    const html = req('PATCH', url, { html: 'h1' });
    await holder.waitForBlocked(2);
    await holder.release();
    for (const res of await Promise.all([subject, html])) expect(res.statusCode, res.body).toBe(200);
    expect((await req('GET', url)).json()).toMatchObject({ subject: 's1', html: 'h1' });
  });

  it('a default selection of a template being deleted answers 404, and its successor stays the default', async () => {
    await createAll('held-select', ['b', 'c']);
    const base = '/notifications/held-select/EMAIL/templates';
    // The delete of b stops where it hands b's default modes to c (the foreign key waits for c's lock).
    holder = await lockTemplate('held-select', 'c');
    const deleted = req('DELETE', `${base}/b`);
    await holder.waitForBlocked(1);
    const selected = req('PATCH', `${base}/default-selection`, { templateId: 'b', modes: ['instant', 'daily'] });
    await holder.waitForBlocked(2);
    await holder.release();
    expect((await deleted).statusCode).toBe(200);
    expectErrorBody(await selected, 404, 'NOT_FOUND', /^Template "held-select\/EMAIL\/b" was not found/);
    expect(await defaultsOf('held-select')).toEqual({ templates: ['c'], defaults: everyMode('c') });
  });

  it('a delete held where it hands its default modes on, and a second delete meanwhile: the last template is the default of every mode', async () => {
    await createAll('held-delete', ['a', 'b', 'c']);
    const base = '/notifications/held-delete/EMAIL/templates';
    // The delete of a stops where it hands a's default modes to b.
    holder = await lockTemplate('held-delete', 'b');
    const first = req('DELETE', `${base}/a`);
    await holder.waitForBlocked(1);
    const second = req('DELETE', `${base}/b`);
    await holder.waitForBlocked(2);
    await holder.release();
    for (const res of await Promise.all([first, second])) expect(res.statusCode, res.body).toBe(200);
    expect(await defaultsOf('held-delete')).toEqual({ templates: ['c'], defaults: everyMode('c') });
  });

  it('a template created while its type is being deleted creates the type again, instead of a component error', async () => {
    await createAll('held-type', ['old']);
    holder = await LockHolder.hold(t.storage, {
      text: 'delete from notification_types where env_id = $1 and notification_id = $2',
      values: [t.account.clientId, 'held-type'],
    });
    const created = req('POST', '/notifications/held-type/EMAIL/templates', { templateId: 'new', subject: 'n', html: '<p>n</p>' });
    await holder.waitForBlocked(1);
    await holder.release('commit');
    const res = await created;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ templateId: 'new', isDefaultFor: Object.fromEntries(DELIVERY_MODES.map((m) => [m, true])) });
    expect(await defaultsOf('held-type')).toEqual({ templates: ['new'], defaults: everyMode('new') });
    expect((await req('GET', '/types/held-type')).statusCode).toBe(200);
  });
});
