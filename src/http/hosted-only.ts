/**
 * Operations of the `pingram` SDK that belong to the hosted service's own account management
 * (organizations, members, billing, usage, the Supabase integration, insights, the visual
 * editor's token) and the voice operations of the spec, which this version does not build.
 * Clarion answers them 404 like any unknown route, with a fix that says why instead of pointing
 * at /openapi.json. Matched by whole path segments, whatever the method.
 */
const NOT_SERVED: readonly { prefix: string; fix: string }[] = [
  ...['/account/organization', '/account/supabase', '/billing', '/organizations', '/organization', '/members', '/profile', '/insights', '/editor/token'].map((prefix) => ({
    prefix,
    fix: 'This operation of the pingram SDK manages the hosted service itself (organizations, members, billing, usage, integrations, insights, the visual editor) and is not part of self-hosted Clarion; see the README, "SDK operations not served".',
  })),
  { prefix: '/voice', fix: 'The voice operations (AI voice agents) are not built in this version of Clarion; see the README, "SDK operations not served".' },
];

/** Why `path` is not served, when it is an operation of the hosted service or one not built yet. */
export function notServedFix(path: string): string | undefined {
  return NOT_SERVED.find(({ prefix }) => path === prefix || path.startsWith(`${prefix}/`))?.fix;
}
