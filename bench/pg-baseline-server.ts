// The ceiling for send acceptance on PostgreSQL: a bare Fastify route doing the same JSON
// validation as POST /send and committing the request JSON with one INSERT per request (each its
// own transaction), the fastest way node-postgres (8.x, its current major) offers for it: a few
// clients in pipeline mode (node-postgres.com, "Pipelining"), each request's INSERT sent on the
// next client in turn without waiting for those before it. Measured on the shared 2-CPU host, 50
// connections, same runs (bench/tmp, 2026-11-29): a pg.Pool of 20 (its pooling guide's example,
// pool.query per request, the baseline before) about 8,900 req/s; pipelined clients: 2 about
// 8,500, 4 about 11,000, 8 about 8,800. PG_PIPELINE_CLIENTS sets the count (default 4).
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { SendBodySchema } from '../src/modules/sending/sending.schemas.js';

const count = Number(process.env.PG_PIPELINE_CLIENTS ?? 4);
const clients = await Promise.all(
  Array.from({ length: count }, async () => {
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL, pipeline: true });
    await client.connect();
    return client;
  }),
);
// Text columns, as Clarion stores ids, requests and times.
await clients[0].query('create table if not exists bench_sends (id text primary key, request text not null, received_at text not null)');

let turn = 0;
const app = Fastify({ logger: false });
app.addSchema(SendBodySchema);
app.post('/send', { schema: { body: { $ref: 'SendBody#' } } }, async (req, reply) => {
  const id = randomUUID();
  const client = clients[turn++ % count];
  await client.query('insert into bench_sends (id, request, received_at) values ($1, $2, $3)', [id, JSON.stringify(req.body), new Date().toISOString()]);
  reply.status(202);
  return { trackingId: id, messages: [] };
});
const port = Number(process.env.PORT);
await app.listen({ port, host: '127.0.0.1' });
console.log(`pg baseline listening on ${port}`);
