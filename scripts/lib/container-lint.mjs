// Checks of the container files that need no container engine: the Dockerfile's syntax and
// instructions (dockerfile-utils, the validator of the Dockerfile language server) plus the
// practices this project requires of its image, and the compose file's shape. Each check answers
// a list of findings, one line each; none means the file passes.
import { validate } from 'dockerfile-utils';
import { parse } from 'yaml';

/** Instructions of a Dockerfile as [keyword, arguments], continuation lines joined, comments dropped. */
function instructions(text) {
  const joined = text.replace(/\\\r?\n/g, ' ');
  return joined
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return [keyword.toUpperCase(), rest.join(' ')];
    });
}

export function lintDockerfile(text) {
  const findings = validate(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
  const all = instructions(text);
  const stages = [];
  for (const [keyword, args] of all) {
    if (keyword === 'FROM') stages.push({ from: args, instructions: [] });
    else stages.at(-1)?.instructions.push([keyword, args]);
  }
  if (stages.length < 2) findings.push('multi-stage build expected: a build stage and a runtime stage');
  const runtime = stages.at(-1)?.instructions ?? [];
  const users = runtime.filter(([k]) => k === 'USER').map(([, a]) => a.split(':')[0]);
  if (users.length === 0 || ['root', '0'].includes(users.at(-1))) findings.push('the runtime stage must run as a non-root USER');
  const healthchecks = runtime.filter(([k]) => k === 'HEALTHCHECK');
  if (healthchecks.length !== 1 || /^NONE\b/i.test(healthchecks[0][1])) findings.push('the runtime stage needs one HEALTHCHECK');
  else if (!healthchecks[0][1].includes('/status')) findings.push('the HEALTHCHECK must ask /status');
  if (!runtime.some(([k]) => k === 'CMD' || k === 'ENTRYPOINT')) findings.push('the runtime stage needs a CMD');
  for (const stage of stages) {
    if (/:latest\b/.test(stage.from) || !/[:@]/.test(stage.from.split(/\s+/)[0])) findings.push(`FROM ${stage.from}: pin the base image's version`);
  }
  for (const [keyword, args] of all) {
    if (keyword !== 'RUN') continue;
    if (/apt-get install/.test(args) && !/--no-install-recommends/.test(args)) findings.push(`RUN ${args.slice(0, 60)}...: apt-get install without --no-install-recommends`);
    if (/apt-get install/.test(args) && !/rm -rf \/var\/lib\/apt\/lists/.test(args)) findings.push(`RUN ${args.slice(0, 60)}...: remove /var/lib/apt/lists in the same RUN`);
    if (/apt-get upgrade|dist-upgrade/.test(args)) findings.push(`RUN ${args.slice(0, 60)}...: no apt-get upgrade in an image`);
    if (/\bsudo\b/.test(args)) findings.push(`RUN ${args.slice(0, 60)}...: no sudo`);
    if (/\bnpm install\b/.test(args)) findings.push(`RUN ${args.slice(0, 60)}...: npm ci, not npm install (the lock file decides)`);
  }
  if (all.some(([k]) => k === 'ADD')) findings.push('use COPY, not ADD');
  return findings;
}

export function lintCompose(text, { required = ['postgres', 'api', 'worker'] } = {}) {
  let doc;
  try {
    doc = parse(text);
  } catch (err) {
    return [`not YAML: ${err.message}`];
  }
  const findings = [];
  const services = doc?.services ?? {};
  for (const name of required) if (!services[name]) findings.push(`service "${name}" is missing`);
  for (const [name, service] of Object.entries(services)) {
    if (!service.image && !service.build) findings.push(`service "${name}" has neither image nor build`);
    for (const [dep, how] of Object.entries(Array.isArray(service.depends_on) ? Object.fromEntries(service.depends_on.map((d) => [d, {}])) : (service.depends_on ?? {}))) {
      if (!services[dep]) findings.push(`service "${name}" depends on unknown service "${dep}"`);
      else if (how.condition === 'service_healthy' && (!(services[dep].healthcheck || services[dep].build || services[dep].image?.startsWith('clarion')) || services[dep].healthcheck?.disable)) {
        findings.push(`service "${name}" waits for "${dep}" to be healthy, but "${dep}" has no health check`);
      }
    }
    const env = service.environment ?? {};
    if (name !== 'postgres' && env.DATABASE_URL && !env.CLARION_SECRET_KEY) findings.push(`service "${name}" shares a database without CLARION_SECRET_KEY`);
    if (name !== 'postgres' && env.CLARION_SECRET_KEY !== undefined && !String(env.CLARION_SECRET_KEY).startsWith('${')) findings.push(`service "${name}" has a CLARION_SECRET_KEY written in the file: take it from the environment`);
  }
  for (const volume of Object.values(services).flatMap((s) => s.volumes ?? [])) {
    const source = typeof volume === 'string' ? volume.split(':')[0] : volume.source;
    if (source && !source.startsWith('.') && !source.startsWith('/') && !(doc.volumes && source in doc.volumes)) findings.push(`named volume "${source}" is not declared`);
  }
  return findings;
}
