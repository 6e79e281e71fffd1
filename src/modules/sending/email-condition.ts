import type { RenderContext } from '../../rendering/liquid.js';
import type { RenderPool } from '../../rendering/render-pool.js';

/**
 * `options.email.condition` of a send: a Liquid condition (what goes between `{% if` and `%}`,
 * e.g. `plan == "pro" and user.email`) over the send's parameters and its user, evaluated when
 * the send is routed. False skips the email channel (routing reason CONDITION_NOT_MET). It runs
 * on the render pool, with the limits of any template, in the turn of `tenant` (the account); an
 * invalid one throws TemplateRenderError.
 */
export async function emailConditionHolds(renders: Pick<RenderPool, 'render'>, condition: string, context: RenderContext, tenant?: string): Promise<boolean> {
  const out = await renders.render('SMS', { 'options.email.condition': `{% if ${condition} %}true{% endif %}` }, context, { tenant });
  return out['options.email.condition'] === 'true';
}
