// Recovery of a broadcast's delivery chain (DeliveryRecovery, the job broadcasts.recover-delivery),
// on both engines, with the controllable clock:
// - a healthy chain is never restarted: steps driven for ten minutes (some late) with the sweep
//   after each; a chain quiet for less than its bound is kept, one quiet for longer is replaced
//   (the old one stops at its next step), the bound doubles after a restart without progress, and
//   a chain that steps between the sweep's read and its claim keeps the broadcast;
// - with the workers: the database refuses a page on every attempt, the chain's job fails for good
//   and the chain ends; the sweep, once the bound has passed, starts a new chain from the send
//   cursor; every recipient gets exactly one mail.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChainDriver, broadcastRow, firstScope, startChain } from '../helpers/broadcast-chains.js';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { captureLogs } from '../helpers/log-capture.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { BroadcastDelivery } from '../../src/modules/broadcasts/broadcast-delivery.js';
import { BroadcastPacing } from '../../src/modules/broadcasts/broadcast-pacing.js';
import { BroadcastsRepository } from '../../src/modules/broadcasts/broadcasts.repository.js';
import { ReputationGuard } from '../../src/modules/broadcasts/reputation-guard.js';
import { SendIntake } from '../../src/modules/sending/intake.js';
import { startWorkers } from '../../src/workers.js';

const users = (t: TestContext, group: string, count: number) =>
  Array.from({ length: count }, (_, i) => userRow(t, `${group}-${i}`, { email: `${group}-${i}@example.com`, properties: JSON.stringify({ group }) }));

describe.each(STORAGE_KINDS)('broadcast delivery recovery: a live chain is kept (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));
  const recovery = () => t.services.broadcasts.recovery;

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
    // The default sender's 10 recipients: handed over in two seconds, then followed every second
    // for as long as their mails are in flight (no workers here: for ever).
    await seedUsers(t, users(t, 'live', 10));
  });
  afterAll(() => t?.close());

  it('never restarts a chain that steps; replaces one quiet beyond its bound, with backoff, unless it steps meanwhile', async () => {
    const { broadcastId: id } = await createDraft(t, { audience: { filter: { 'properties.group': 'live' } } });
    const token = await startChain(t, id);
    const driver = new ChainDriver(t, clock).add(id, token);
    const began = clock.now().getTime();
    let restarted = 0;
    // Ten minutes of steps, every seventh 3 s late, with the sweep before each.
    await driver.run(async () => {
      restarted += await recovery().restartQuiet();
      return clock.now().getTime() >= began + 600_000;
    }, (n) => (n % 7 === 6 ? 3000 : 0));
    expect(driver.steps).toBeGreaterThan(300);
    expect(restarted).toBe(0);
    expect((await broadcastRow(t, id)).send_token).toBe(token);

    // The chain stops stepping. A step marks the row at least every 10 s, which the bound allows for.
    const lastStep = clock.now().getTime();
    const bound = recovery().quietBound(0);
    clock.set(new Date(lastStep + bound - 10_000));
    expect(await recovery().restartQuiet()).toBe(0);
    clock.set(new Date(lastStep + bound + 1));
    expect(await recovery().restartQuiet()).toBe(1);
    const second = await broadcastRow(t, id);
    expect(second.send_token).not.toBe(token);
    expect(second.send_restarts).toBe(1);
    // The old chain, should its job run again, stops.
    expect(await t.services.broadcasts.delivery.step(firstScope(t), id, token)).toBeNull();

    // The new chain is quiet too (never run): replaced only after twice the bound (backoff).
    const restartedAt = clock.now().getTime();
    expect(recovery().quietBound(1)).toBe(2 * bound);
    clock.set(new Date(restartedAt + 2 * bound - 1));
    expect(await recovery().restartQuiet()).toBe(0);
    clock.set(new Date(restartedAt + 2 * bound + 1));
    // The sweep reads it quiet; its chain steps before the sweep claims it: the chain keeps it.
    const repo = new BroadcastsRepository(t.deps.db);
    const [quiet] = await repo.quietChains(new Date(restartedAt + 1).toISOString(), 10, null);
    expect(quiet).toMatchObject({ id, send_token: second.send_token });
    expect(await t.services.broadcasts.delivery.step(firstScope(t), id, second.send_token!)).not.toBeNull();
    expect(await repo.restartDelivery(firstScope(t), id, quiet.send_token, 'another-chain', new Date(restartedAt + 1).toISOString(), clock.now().toISOString())).toBe(false);
    expect(await recovery().restartQuiet()).toBe(0);
    expect((await broadcastRow(t, id)).send_token).toBe(second.send_token);
    expect((await callAs(t, 'POST', `/broadcasts/${id}/cancel`)).statusCode).toBe(200);
  });
});

describe.each(STORAGE_KINDS)('broadcast delivery recovery: a chain whose job failed for good (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));
  const logs = captureLogs('warn');
  const logged = (msg: string) => logs.lines.filter((l) => String(l.msg).startsWith(msg));
  /** While set, the database refuses every page (the intake's insert throws, rolling the page back). */
  let refusing = false;
  let refused = 0;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    // Retries at once: the deliver job reaches its last attempt (50) without waiting.
    t = await createTestContext(kind, { clock, logger: logs.logger, queue: { backoff: { baseMs: 0, capMs: 0 } }, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    const intake = new SendIntake(t.deps, t.deps.queue);
    const broadcasts = t.services.broadcasts;
    broadcasts.delivery = new BroadcastDelivery(
      t.deps,
      broadcasts.service,
      {
        acceptWithin: (trx, units) => {
          if (!refusing) return intake.acceptWithin(trx, units);
          refused++;
          return Promise.reject(new Error('could not write the page: the database refused it'));
        },
      },
      broadcasts.tracking,
      new ReputationGuard(t.deps, broadcasts.tracking),
      new BroadcastPacing(t.deps, (address) => broadcasts.service.isDefaultSender(address)),
    );
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    await seedUsers(t, users(t, 'broken', 10));
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  it('the sweep restarts the chain from the send cursor once its bound has passed; everyone gets one mail', async () => {
    const { broadcastId: id } = await createDraft(t, { audience: { filter: { 'properties.group': 'broken' } } });
    expect((await callAs(t, 'POST', `/broadcasts/${id}/send`)).statusCode).toBe(200);
    // The first page goes (the default sender: 3 at a time, 5 a second), then the database refuses every page.
    const first = await eventually(async () => {
      const row = await broadcastRow(t, id);
      return row.send_cursor > 0 ? row : undefined;
    }, 15_000, 'the first page handed over');
    refusing = true;
    await eventually(
      () => {
        clock.advance(1000);
        return logged('broadcast delivery stopped').length > 0;
      },
      20_000,
      'the chain\'s job failed for good',
    );
    expect(refused).toBeGreaterThanOrEqual(40);
    const ended = await broadcastRow(t, id);
    expect(ended).toMatchObject({ status: 'sending', send_cursor: first.send_cursor, send_token: first.send_token });
    refusing = false;

    clock.advance(t.services.broadcasts.recovery.quietBound(0));
    await t.workers!.scheduleBroadcastRecovery();
    await eventually(() => logged('broadcast delivery restarted').length === 1, 10_000, 'the chain restarted');
    expect(logged('broadcast delivery restarted')[0]).toMatchObject({ broadcastId: id, restarts: 1 });
    expect((await broadcastRow(t, id)).send_token).not.toBe(first.send_token);

    await eventually(
      async () => {
        clock.advance(1000);
        return (await broadcastRow(t, id)).status === 'sent';
      },
      20_000,
      'the broadcast sent',
    );
    // Progress reset the backoff; every recipient got exactly one mail.
    expect((await broadcastRow(t, id)).send_restarts).toBe(0);
    const to = smtp.messages.map((m) => m.envelope.to[0]).sort();
    expect(to).toEqual(users(t, 'broken', 10).map((u) => u.email).sort());
    expect(logged('broadcast delivery restarted')).toHaveLength(1);
  });
});
