// The ceiling for send acceptance on PostgreSQL: a bare Fastify route doing the same JSON
// validation as POST /send and committing the request JSON with one INSERT per request
// through a pooled pg client (pool.query: a client is checked out and released per statement,
// as node-postgres's pooling guide advises for single queries; its max is the guide's example, 20).
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { SendBodySchema } from '../src/modules/sending/sending.schemas.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.PG_POOL_MAX ?? 20), idleTimeoutMillis: 30_000, connectionTimeoutMillis: 2_000 });
// Text columns, as Clarion stores ids, requests and times.
await pool.query('create table if not exists bench_sends (id text primary key, request text not null, received_at text not null)');

const app = Fastify({ logger: false });
app.addSchema(SendBodySchema);
app.post('/send', { schema: { body: { $ref: 'SendBody#' } } }, async (req, reply) => {
  const id = randomUUID();
  await pool.query('insert into bench_sends (id, request, received_at) values ($1, $2, $3)', [id, JSON.stringify(req.body), new Date().toISOString()]);
  reply.status(202);
  return { trackingId: id, messages: [] };
});
const port = Number(process.env.PORT);
await app.listen({ port, host: '127.0.0.1' });
console.log(`pg baseline listening on ${port}`);
