/** The BOINC layer's redaction rule, and the GAHP's log that it is registered with. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { redactBoincCredentials } from '../../boinc-rpc/redact.js';
import { createServices } from '../../gahp/create-services.js';
import { Logger } from '../../gahp/log.js';

const line = 'GET /get_output.php?cmd=workunit_file&auth_str=0123abcd&wu_name=j <authenticator>s3cr3t-value</authenticator> done';

test('auth_str values and <authenticator> elements are hidden, whatever their value', () => {
  expect(redactBoincCredentials(line)).toBe('GET /get_output.php?cmd=workunit_file&auth_str=***&wu_name=j <authenticator>***</authenticator> done');
  expect(redactBoincCredentials('nothing secret here')).toBe('nothing secret here');
});

test('the protocol layer\'s logger knows no BOINC format; the GAHP\'s services register the rule', async () => {
  const lines: string[] = [];
  const log = new Logger({ write: (l) => lines.push(l) }, 'debug');
  log.debug(line);
  expect(lines[0]).toContain('auth_str=0123abcd');
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'redact-'));
  try {
    const services = createServices({ stateDir, log });
    log.debug(line);
    expect(lines[1]).toContain('auth_str=***');
    expect(lines[1]).not.toContain('s3cr3t-value');
    await services.ledger.close();
  } finally {
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});
