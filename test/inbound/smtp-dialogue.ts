import net from 'node:net';

/**
 * A bare SMTP dialogue: sends each line after the previous answer and returns every answer, the
 * greeting first. A message goes as one line: its text, then `\r\n.` (dot-stuffed by the caller).
 * A connection closed before an answer fails the dialogue instead of waiting for it.
 */
export async function smtpDialogue(port: number, lines: string[]): Promise<string[]> {
  const socket = net.connect(port, '127.0.0.1');
  const answers: string[] = [];
  let buffer = '';
  let waiting: { resolve: (reply: string) => void; reject: (err: Error) => void } | null = null;
  socket.on('data', (chunk) => {
    buffer += chunk.toString('utf8');
    // A reply ends with a line whose code is followed by a space.
    const match = /(?:^|\r\n)(\d{3}) [^\r\n]*\r\n$/.exec(buffer);
    if (match && waiting) {
      const reply = buffer.trim();
      buffer = '';
      const w = waiting;
      waiting = null;
      w.resolve(reply);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => waiting?.reject(new Error(`the server closed the connection before answering${buffer ? `: ${buffer}` : ''}`)));
  const next = () => new Promise<string>((resolve, reject) => (waiting = { resolve, reject }));
  try {
    answers.push(await next());
    for (const line of lines) {
      const answer = next();
      socket.write(`${line}\r\n`);
      answers.push(await answer);
    }
  } finally {
    socket.end();
  }
  return answers;
}
