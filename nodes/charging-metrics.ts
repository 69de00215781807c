import type { Node, NodeAPI, NodeDef, NodeMessage } from 'node-red';
import { NodeLifecycle } from './common/node-lifecycle';
import { Status } from './common/status';
import { responseHeaders, scrapeFormat } from './lib/metrics/exposition';
import { runtimeMetrics } from './lib/metrics/registry';

/**
 * The charging metrics of this runtime, on any input: msg.payload is the
 * Prometheus text exposition (or, with msg.format "json", the same values as
 * an object) and msg.headers its content type, for `http in` (GET /metrics)
 * → charging-metrics → `http response`, behind Node-RED's own httpNodeAuth.
 */
export = function register(RED: NodeAPI): void {
  function ChargingMetrics(this: Node, config: NodeDef): void {
    RED.nodes.createNode(this, config);
    const life = new NodeLifecycle(RED, this);
    life.onMessage(async (msg) => {
      const format = scrapeFormat((msg as { format?: unknown }).format);
      const scrape = await runtimeMetrics().scrape(format);
      life.board.set(Status.ok('metricsScraped', { count: scrape.samples }));
      const headers = responseHeaders((msg as { headers?: unknown }).headers, scrape.contentType);
      return { ...msg, payload: scrape.body, headers } as NodeMessage;
    });
  }
  RED.nodes.registerType('charging-metrics', ChargingMetrics);
};
