// Strips hop-by-hop fields (RFC 9110 §7.6.1) and proxy credentials from a header list before it crosses
// Sluice: Connection and every field it names, Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding,
// Upgrade. Proxy-Authorization never reaches an origin (principle A8 in docs/principles.md;
// http-proxy's leak, docs/decisions/0005-no-http-proxy.md).

const ALWAYS = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate',
  'proxy-authentication-info', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host',
]);

/** Field names listed in Connection (RFC 9110 §7.6.1), lowercase. */
function connectionListed(values: readonly string[]): Set<string> {
  const listed = new Set<string>();
  for (const value of values) for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '') listed.add(name);
  }
  return listed;
}

/** From Node's rawHeaders [name, value, name, value…] to a flat list without hop-by-hop fields or Host. */
export function stripHopByHop(rawHeaders: readonly string[]): string[] {
  const connectionValues: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] ?? '').toLowerCase() === 'connection') connectionValues.push(rawHeaders[i + 1] ?? '');
  }
  const listed = connectionListed(connectionValues);
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const lower = name.toLowerCase();
    if (ALWAYS.has(lower) || listed.has(lower)) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  return out;
}

/** The same for a response header object as returned by the HTTP client. */
export function stripHopByHopObject(headers: Readonly<Record<string, string | string[] | undefined>>): string[] {
  const flat: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) flat.push(name, v);
    else flat.push(name, value);
  }
  const stripped = stripHopByHop(flat);
  return stripped;
}
