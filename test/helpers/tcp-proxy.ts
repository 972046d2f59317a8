import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 to a local port, standing for one client's network
 * path to a server: `cut()` resets every connection through it and refuses new
 * ones (the client is cut off), `heal()` lets connections through again.
 */
export interface TcpProxy {
  /** `nats://127.0.0.1:<port>` of the proxy. */
  url: string;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

/** Start a proxy to `127.0.0.1:<targetPort>`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let isCut = false;
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect({ host: '127.0.0.1', port: targetPort });
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no proxy port');
  return {
    url: `nats://127.0.0.1:${address.port}`,
    cut() {
      isCut = true;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    heal() {
      isCut = false;
    },
    close() {
      isCut = true;
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
