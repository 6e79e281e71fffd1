import dgram from 'node:dgram';
import dnsPacket, { type Answer } from 'dns-packet';

/**
 * An authoritative DNS server on loopback (UDP, packets by dns-packet) that answers what a test
 * published: TXT and CNAME records. A name it knows without the asked type answers NOERROR with no
 * data, an unknown name NXDOMAIN; a name marked `servfail` answers SERVFAIL and one marked `silent`
 * is never answered (a timeout).
 */
export interface DnsTestServer {
  /** `127.0.0.1:<port>`, the form of CLARION_DNS_SERVER. */
  address: string;
  port: number;
  /** Adds a TXT record (a value longer than 255 bytes goes out as several strings, as zone files split it). */
  publishTxt(name: string, value: string): void;
  publishCname(name: string, target: string): void;
  /** Removes every record of a name. */
  remove(name: string): void;
  servfail(name: string, on?: boolean): void;
  silent(name: string, on?: boolean): void;
  /** Questions received so far, as `TYPE name`. */
  queries: string[];
  close(): Promise<void>;
}

const key = (name: string) => name.toLowerCase().replace(/\.$/, '');

function txtStrings(value: string): Buffer[] {
  const bytes = Buffer.from(value);
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) parts.push(bytes.subarray(i, i + 255));
  return parts.length ? parts : [Buffer.alloc(0)];
}

export async function startDnsServer(): Promise<DnsTestServer> {
  const txt = new Map<string, string[]>();
  const cname = new Map<string, string>();
  const servfail = new Set<string>();
  const silent = new Set<string>();
  const queries: string[] = [];
  const socket = dgram.createSocket('udp4');

  socket.on('message', (msg, rinfo) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (!question) return;
    const name = key(question.name);
    queries.push(`${question.type} ${name}`);
    if (silent.has(name)) return;
    let rcode: 'NOERROR' | 'NXDOMAIN' | 'SERVFAIL' = 'NOERROR';
    const answers: Answer[] = [];
    if (servfail.has(name)) rcode = 'SERVFAIL';
    else if (question.type === 'TXT' && txt.has(name)) for (const value of txt.get(name)!) answers.push({ type: 'TXT', name: question.name, ttl: 0, data: txtStrings(value) });
    else if (question.type === 'CNAME' && cname.has(name)) answers.push({ type: 'CNAME', name: question.name, ttl: 0, data: cname.get(name)! });
    else if (!txt.has(name) && !cname.has(name)) rcode = 'NXDOMAIN';
    const reply = dnsPacket.encode({
      id: query.id,
      type: 'response',
      // Authoritative answer, recursion desired echoed, recursion available, and the RCODE.
      flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3 }[rcode],
      questions: query.questions,
      answers,
    });
    socket.send(reply, rinfo.port, rinfo.address);
  });

  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const port = socket.address().port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    publishTxt: (name, value) => txt.set(key(name), [...(txt.get(key(name)) ?? []), value]),
    publishCname: (name, target) => cname.set(key(name), target),
    remove: (name) => {
      txt.delete(key(name));
      cname.delete(key(name));
    },
    servfail: (name, on = true) => void (on ? servfail.add(key(name)) : servfail.delete(key(name))),
    silent: (name, on = true) => void (on ? silent.add(key(name)) : silent.delete(key(name))),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
