/**
 * The project the GAHP talks to, set by BOINC_SELECT_PROJECT (or the CLI's --project-url
 * and --authenticator-file), and the RPC client for it.
 */
import type { BoincRpc, BoincClientOptions } from '../boinc-rpc/types.js';

export interface ProjectSelection {
  url: string;
  authenticator: string;
}

export type RpcFactory = (opts: BoincClientOptions) => BoincRpc;

export class ProjectSession {
  private selection: ProjectSelection | undefined;
  private client: BoincRpc | undefined;
  /** Every client made, closed at shutdown (in-flight commands keep theirs until then). */
  private readonly opened: BoincRpc[] = [];

  constructor(
    private readonly makeClient: RpcFactory,
    private readonly clientDefaults: Omit<BoincClientOptions, 'projectUrl' | 'authenticator'> = {},
  ) {}

  select(selection: ProjectSelection): void {
    if (this.selection && this.selection.url === selection.url && this.selection.authenticator === selection.authenticator) return;
    // In-flight commands keep the client they started with; it is closed at shutdown only.
    this.selection = { ...selection };
    this.client = undefined;
  }

  get current(): ProjectSelection | undefined {
    return this.selection;
  }

  /** The RPC client of the selected project; throws if none is selected. */
  rpc(): { project: ProjectSelection; rpc: BoincRpc } {
    if (!this.selection) throw new Error('no project selected (send BOINC_SELECT_PROJECT <url> <authenticator> first)');
    if (!this.client) {
      this.client = this.makeClient({
        ...this.clientDefaults,
        projectUrl: this.selection.url,
        authenticator: this.selection.authenticator,
      });
      this.opened.push(this.client);
    }
    return { project: this.selection, rpc: this.client };
  }

  close(): void {
    for (const c of this.opened) c.close();
    this.opened.length = 0;
  }
}
