import { type MessagePort, parentPort } from 'node:worker_threads';
import type { Channel } from '../http/schemas.js';
import { renderChannelContent } from './content.js';
import { DEFAULT_LIMITS, LiquidRenderer, type RenderLimits, TemplateRenderError } from './liquid.js';
import type { FromPool, ToPool } from './render-pool.js';

/**
 * The render thread (see RenderPool): renders one channel content at a time with the process's
 * default LiquidJS limits (or the job's tighter ones), asking the pool for email components when
 * the html uses some.
 */
function serve(port: MessagePort): void {
  // This thread's state: a renderer (and parse cache) per set of limits, and the component lookups it awaits.
  const renderers = new Map<string, LiquidRenderer>();
  const rendererFor = (limits: RenderLimits = DEFAULT_LIMITS) => {
    const key = JSON.stringify(limits);
    let renderer = renderers.get(key);
    if (!renderer) renderers.set(key, (renderer = new LiquidRenderer(limits)));
    return renderer;
  };
  const waiting = new Map<number, { resolve: (found: Record<string, string>) => void; reject: (err: Error) => void }>();
  const post = (msg: ToPool) => port.postMessage(msg);

  port.on('message', (msg: FromPool) => {
    if (msg.type === 'components') {
      const wait = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error !== undefined) wait?.reject(new Error(msg.error));
      else wait?.resolve(msg.found ?? {});
      return;
    }
    void render(msg.id, msg.channel, msg.content, msg.context, rendererFor(msg.limits));
  });

  async function render(id: number, channel: Channel, content: Record<string, unknown>, context: Record<string, unknown>, renderer: LiquidRenderer): Promise<void> {
    const resolveComponents = (ids: string[]) =>
      new Promise<Record<string, string>>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        post({ type: 'components', id, ids });
      });
    try {
      const out = await renderChannelContent(channel, content, context, { renderer, resolveComponents });
      post({ type: 'done', id, ok: true, content: out });
    } catch (err) {
      post({ type: 'done', id, ok: false, renderError: err instanceof TemplateRenderError, message: err instanceof Error ? err.message : String(err) });
    }
  }

  post({ type: 'ready' });
}

serve(parentPort!);
