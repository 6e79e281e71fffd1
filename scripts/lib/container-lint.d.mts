/** Findings (one line each) about a Dockerfile's text; empty when it passes. */
export function lintDockerfile(text: string): string[];
/** Findings about a compose file's text; `required`: services it must define. */
export function lintCompose(text: string, options?: { required?: string[] }): string[];
