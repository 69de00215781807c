/**
 * Agents for a proxy, in a module of their own so that the proxy-agent packages
 * load only when a proxy applies (see Transport).
 *
 * Why not axios's own proxy support? Measured with axios 1.21 in
 * test/lib/client/transport.test.ts: it tunnels https with CONNECT and keeps our
 * private CA, but opens a new tunnel (and TLS handshake) for every request: 5
 * CONNECTs for 5 queries, where these https-proxy-agent 7 agents, being
 * http.Agent subclasses, pooled 20 queries into at most Max in flight tunnels.
 */
import type http from 'node:http';
import type https from 'node:https';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';

/**
 * https-proxy-agent 7 does not pass its own options to the TLS connection with
 * the destination (it resets `this.options`), so a private CA would be ignored
 * behind a proxy. This adds the TLS options to every tunnelled connection.
 */
class TlsTunnelAgent extends HttpsProxyAgent<string> {
  constructor(
    proxy: string,
    agentOptions: http.AgentOptions,
    private readonly tls: https.AgentOptions,
  ) {
    super(proxy, agentOptions);
  }

  override connect(req: http.ClientRequest, opts: Parameters<HttpsProxyAgent<string>['connect']>[1]): ReturnType<HttpsProxyAgent<string>['connect']> {
    return super.connect(req, { ...this.tls, ...opts } as typeof opts);
  }
}

export function proxyAgents(proxy: string, agentOptions: http.AgentOptions, tls: https.AgentOptions): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  return {
    httpAgent: new HttpProxyAgent(proxy, agentOptions),
    httpsAgent: new TlsTunnelAgent(proxy, agentOptions, tls) as unknown as https.Agent,
  };
}
