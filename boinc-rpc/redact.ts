/**
 * Where BOINC's wire format carries an authenticator, whatever its value: the
 * `auth_str=` parameter of output-download URLs and the `<authenticator>` element of RPC
 * requests (docs/boinc-server.md). The GAHP registers this with its log (run-gahp.ts), so
 * the protocol layer's logger needs to know nothing of BOINC; the known authenticators
 * themselves are registered as secrets when a project is selected.
 */
export function redactBoincCredentials(text: string): string {
  let out = text;
  if (out.includes('auth_str=')) out = out.replace(/(auth_str=)[^&\s"'<>]*/g, '$1***');
  if (out.includes('<authenticator>')) out = out.replace(/(<authenticator>)[^<]*(<\/authenticator>)/g, '$1***$2');
  return out;
}
