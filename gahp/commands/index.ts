/** The BOINC_* commands, one module each. */
import type { Command } from '../protocol/commands.js';
import type { GahpServices } from '../services.js';
import { selectProjectCommand } from './select-project.js';
import { pingCommand } from './ping.js';

export function boincCommands(services: GahpServices): Command[] {
  return [
    selectProjectCommand(services),
    pingCommand(services),
  ];
}
