// The ceiling for send acceptance: a bare Fastify route doing the same JSON validation as
// POST /send (the same TypeBox schema), answering a fresh id, storing nothing.
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { SendBodySchema } from '../src/modules/sending/sending.schemas.js';

const app = Fastify({ logger: false });
app.addSchema(SendBodySchema);
app.post('/send', { schema: { body: { $ref: 'SendBody#' } } }, async (_req, reply) => {
  reply.status(202);
  return { trackingId: randomUUID(), messages: [] };
});
const port = Number(process.env.PORT);
await app.listen({ port, host: '127.0.0.1' });
console.log(`baseline listening on ${port}`);
