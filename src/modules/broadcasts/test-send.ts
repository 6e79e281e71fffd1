import type { Deps } from '../../deps.js';
import { invalid } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { SendingService } from '../sending/sending.service.js';
import type { SendBody } from '../sending/sending.schemas.js';
import { AudienceRepository } from './audience.repository.js';
import { checkAddress } from './broadcast-input.js';
import type { BroadcastsService } from './broadcasts.service.js';

export const MAX_TEST_ADDRESSES = 5;

/**
 * POST /broadcasts/{broadcastId}/test: the broadcast as it stands (any status) sent to a few
 * addresses through POST /send's path (SendingService.accept: the intake, the email channel,
 * Liquid merge tags with the user), one send per address, each with its own trackingId. These
 * sends are not the broadcast's: they make no recipient rows and count in no metrics of it (they
 * count as messages of the account, as any send).
 */
export class BroadcastTestSender {
  constructor(
    private readonly deps: Pick<Deps, 'db'>,
    private readonly broadcasts: Pick<BroadcastsService, 'row' | 'checkSender'>,
    private readonly sending: Pick<SendingService, 'accept'>,
  ) {}

  async send(scope: EnvScope, id: string, emails: string[]): Promise<{ sent: { email: string; trackingId: string }[] }> {
    const row = await this.broadcasts.row(scope, id);
    // Duplicates whatever their case dropped, the first spelling kept.
    const byKey = new Map<string, string>();
    emails.forEach((e, i) => {
      const address = checkAddress(e, `emails[${i}]`);
      if (!byKey.has(address.toLowerCase())) byKey.set(address.toLowerCase(), address);
    });
    const addresses = [...byKey.values()];
    if (addresses.length === 0 || addresses.length > MAX_TEST_ADDRESSES) throw invalid(`emails must hold 1 to ${MAX_TEST_ADDRESSES} addresses.`);
    if (row.notification_id === null) throw invalid('type is not set: a test is a send of the broadcast\'s notification type.', 'Set one with PATCH /broadcasts/{broadcastId} {"type": "newsletter"}.');
    if (row.subject.trim() === '') throw invalid('subject is empty: an email is sent with a subject.', 'Set one with PATCH /broadcasts/{broadcastId} {"subject": "..."}.');
    await this.broadcasts.checkSender(scope, row.from_address);
    // An address of a known user renders with that user (merge tags); another becomes a user, as with POST /send.
    const known = new Map<string, string>();
    for (const user of await new AudienceRepository(this.deps.db).byEmails(scope, addresses, null)) if (!known.has(user.email!)) known.set(user.email!, user.id);
    const sent = [];
    for (const email of addresses) {
      const userId = known.get(email);
      const body: SendBody = {
        type: row.notification_id,
        to: userId ? { id: userId } : { email },
        forceChannels: ['EMAIL'],
        email: { subject: row.subject, html: row.html, senderName: row.from_name, senderEmail: row.from_address },
        options: { email: { fromAddress: row.from_address, fromName: row.from_name, ...(row.reply_to_address ? { replyToAddresses: [row.reply_to_address] } : {}) } },
      };
      const { trackingId } = await this.sending.accept(scope, body);
      sent.push({ email, trackingId });
    }
    return { sent };
  }
}
