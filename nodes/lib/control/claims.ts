/**
 * Which charging-control nodes of one runtime control which connector. Two
 * nodes on one connector (same configuration, locationId, evseId) fight: one
 * stops the other's session, which the other then takes for an end at the
 * station. Nothing forbids it (a flow may mean it), so both are told.
 */
export interface Claimant {
  id: string;
  /** another node claims the same connector */
  conflict(otherId: string): void;
}

export class ConnectorClaims {
  private readonly byConnector = new Map<string, Map<string, Claimant>>();

  /** One key per connector of a configuration (the token aside: two tokens on one connector fight too). */
  static key(service: string, locationId: string, evseId: string): string {
    return JSON.stringify([service, locationId, evseId]);
  }

  /** `who` controls the connector; each node already on it and `who` hear of each other, once. */
  claim(connector: string, who: Claimant): void {
    let claimants = this.byConnector.get(connector);
    if (!claimants) {
      claimants = new Map();
      this.byConnector.set(connector, claimants);
    }
    if (claimants.has(who.id)) return;
    for (const other of claimants.values()) {
      other.conflict(who.id);
      who.conflict(other.id);
    }
    claimants.set(who.id, who);
  }

  /** The node closed: its connectors are free. */
  release(id: string): void {
    for (const [connector, claimants] of this.byConnector) {
      claimants.delete(id);
      if (claimants.size === 0) this.byConnector.delete(connector);
    }
  }
}
