/**
 * Layering the build enforces (DESIGN.md "One owner per state"): no import cycles, and channel
 * adapters (providers) never reach into the domain modules. `npm run lint` runs it; .ci/run too.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle: modules that need each other belong together, or one of them needs a smaller seam.',
      from: { path: '^src' },
      to: { circular: true, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'channels-not-to-modules',
      severity: 'error',
      comment: 'channels/ are providers behind one interface per channel; they never import the domain modules.',
      from: { path: '^src/channels' },
      to: { path: '^src/modules' },
    },
    {
      name: 'channels-not-to-local-providers',
      severity: 'error',
      comment: 'Local stand-ins for providers (src/local-providers: the development carrier, the mail catcher) are reached over their protocol or through the composition root, never imported by channel adapters.',
      from: { path: '^src/channels' },
      to: { path: '^src/local-providers' },
    },
    {
      name: 'modules-not-to-local-providers',
      severity: 'error',
      comment: 'Domain modules do not know the local stand-ins for providers; only the composition root (app.ts, services.ts) wires them in.',
      from: { path: '^src/modules' },
      to: { path: '^src/local-providers' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js'] },
  },
};
