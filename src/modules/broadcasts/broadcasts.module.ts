import type { Deps } from '../../deps.js';
import type { DomainsService } from '../domains/domains.service.js';
import type { SendingService } from '../sending/sending.service.js';
import { AudienceService } from './audience.service.js';
import { BroadcastReports } from './broadcast-reports.js';
import { BroadcastSending } from './broadcast-sending.js';
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
  jobs: BroadcastJobs;
}

export function buildBroadcasts(deps: Deps, domains: Pick<DomainsService, 'checkFromAddress'>, sending: Pick<SendingService, 'accept'>): Broadcasts {
  const jobs = new BroadcastJobs(deps);
  const audience = new AudienceService(deps);
  const service = new BroadcastsService(deps, audience, domains, jobs);
  return {
    service,
    audience,
    reports: new BroadcastReports(deps),
    tests: new BroadcastTestSender(deps, service, sending),
    sending: new BroadcastSending(deps, service, audience, jobs),
    jobs,
  };
}
