// The shared vocabulary of one hop, as branded and readonly types. No I/O, no logic.

declare const brand: unique symbol;

export type Scheme = 'http' | 'https' | 'ws' | 'wss' | 'tcp';
export const SCHEMES: readonly Scheme[] = ['http', 'https', 'ws', 'wss', 'tcp'];

export type HostKind = 'name' | 'ipv4' | 'ipv6';

/** The only form of a destination that policy sees (see docs/glossary.md). `key` is `host:port` with IPv6 bracketed. */
export type CanonicalDestination = {
  readonly host: string;
  readonly hostKind: HostKind;
  readonly port: number;
  readonly key: string;
} & { readonly [brand]: 'CanonicalDestination' };

export type AddressClass =
  | 'public'
  | 'private'
  | 'loopback'
  | 'link_local'
  | 'cgnat'
  | 'unspecified'
  | 'multicast'
  | 'reserved'
  | 'host'
  | 'self';

export const ADDRESS_CLASSES: readonly AddressClass[] = [
  'public', 'private', 'loopback', 'link_local', 'cgnat', 'unspecified', 'multicast', 'reserved', 'host', 'self',
];

/**
 * Classes a grant may add beyond public; unspecified, multicast and self can never be granted. `host`
 * (the machine's own non-loopback interface addresses, on every port) is reached only by naming it.
 */
export const GRANTABLE_CLASSES: readonly AddressClass[] = ['private', 'loopback', 'link_local', 'cgnat', 'reserved', 'host'];

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

export interface ClassifiedAddress extends ResolvedAddress {
  readonly class: AddressClass;
  readonly allowed: boolean;
}

/** An address that passed the grant's address check; egress dials exactly these, in order. */
export type PinnedAddress = {
  readonly address: string;
  readonly family: 4 | 6;
  readonly port: number;
  readonly class: AddressClass;
} & { readonly [brand]: 'PinnedAddress' };

export interface Principal {
  readonly grantId: string;
  /** How it was identified: a dedicated listener, a token, or a client certificate (issue 28). */
  readonly via: 'listener' | 'token' | 'certificate';
}

export type RequestKind = 'connect' | 'forward';

/** An upstream proxy from Sluice's own config (route infrastructure, never chosen by a principal). */
/** The configured proxy authentication: `auto` follows the proxy's 407 offer, strongest first. */
export type ProxyAuthMode = 'none' | 'basic' | 'negotiate' | 'ntlm' | 'auto';

export interface ProxyNtlmCredentials {
  readonly user: string;
  readonly domain: string;
  readonly password: string;
}

export interface UpstreamProxy {
  /** `http://host:port` or `https://host:port`, never with credentials; used in decisions and logs. */
  readonly label: string;
  readonly tls: boolean;
  readonly host: string;
  readonly port: number;
  /** `Basic …` for Proxy-Authorization, sent to this proxy only; never logged. */
  readonly authorization: string | null;
  /**
   * How Sluice authenticates to this proxy (docs/routes.md#proxy-authentication). Absent: `basic` when
   * `authorization` is set, otherwise `none`.
   */
  readonly auth?: ProxyAuthMode;
  /** NTLM credentials from the credentials file (`ntlm` and `auto`); never logged. */
  readonly ntlm?: ProxyNtlmCredentials | null;
  /** The Kerberos service name for Negotiate (GSS host-based form, `HTTP@proxy.corp.example`); absent: `HTTP@<host>`. */
  readonly spn?: string | null;
  /** Extra trusted roots (the enterprise CA) in addition to the system roots, PEM. */
  readonly ca: string | null;
  /** The proxy inspects TLS: it is a credential-observing route (principle A2 in docs/principles.md). */
  readonly inspectsTls: boolean;
  /** Send the checked IP literal upstream instead of the name, so the pin survives the hop. */
  readonly sendResolvedAddress: boolean;
  /**
   * A proxy a PAC answer named that is not in route.pac.credentialProxies: Sluice sends it no credentials
   * (no Basic, NTLM or Negotiate), so a 407 from it ends the hop with upstream_auth_required.
   */
  readonly credentialsWithheld?: boolean;
}
