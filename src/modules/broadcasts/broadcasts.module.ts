import type { Deps } from '../../deps.js';
import type { LiquidRenderer } from '../../rendering/liquid.js';
import type { DomainsService } from '../domains/domains.service.js';
import type { SendingService } from '../sending/sending.service.js';
import { AudienceService } from './audience.service.js';
import { BroadcastReports } from './broadcast-reports.js';
import { BroadcastDelivery } from './broadcast-delivery.js';
import { BroadcastPacing } from './broadcast-pacing.js';
import { BroadcastSending } from './broadcast-sending.js';
import { DeliveryRecovery } from './delivery-recovery.js';
import { RecipientTracking } from './recipient-tracking.js';
import { ReputationGuard } from './reputation-guard.js';
import type { SendIntake } from '../sending/intake.js';
import { BroadcastJobs } from './broadcasts.jobs.js';
import { BroadcastsService } from './broadcasts.service.js';
import { BroadcastTestSender } from './test-send.js';

/** The services of email broadcasts, built once per process by the composition root (services.ts). */
export interface Broadcasts {
  /** Drafts and the operations of the state table. */
  service: BroadcastsService;
  /** Audience previews and the freeze of audiences into recipients. */
  audience: AudienceService;
  /** Metrics and recipient lists. */
  reports: BroadcastReports;
  /** POST .../test. */
  tests: BroadcastTestSender;
  /** What runs once a broadcast is sending (the freeze, scheduled starts); its jobs call it. */
  sending: BroadcastSending;
  /** Delivery of the frozen recipients: paced pages into the intake, then completion. */
  delivery: BroadcastDelivery;
  /** Restarts delivery chains that ended or stalled; its job calls it every minute. */
  recovery: DeliveryRecovery;
  /** Recipients' states from their deliveries. */
  tracking: RecipientTracking;
  jobs: BroadcastJobs;
}

export function buildBroadcasts(
  deps: Deps,
  domains: Pick<DomainsService, 'checkFromAddress'>,
  sending: Pick<SendingService, 'accept'>,
  intake: Pick<SendIntake, 'acceptWithin'>,
  renderer: LiquidRenderer,
): Broadcasts {
  const jobs = new BroadcastJobs(deps);
  const audience = new AudienceService(deps);
  const service = new BroadcastsService(deps, audience, domains, jobs, renderer);
  const tracking = new RecipientTracking(deps);
  return {
    service,
    audience,
    reports: new BroadcastReports(deps, tracking),
    tests: new BroadcastTestSender(deps, service, sending),
    sending: new BroadcastSending(deps, service, audience, jobs),
    delivery: new BroadcastDelivery(deps, service, intake, tracking, new ReputationGuard(deps, tracking), new BroadcastPacing(deps, (address) => service.isDefaultSender(address))),
    recovery: new DeliveryRecovery(deps, jobs),
    tracking,
    jobs,
  };
}
