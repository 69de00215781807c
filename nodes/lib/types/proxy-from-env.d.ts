// proxy-from-env ships no types; this is the one function we use.
declare module 'proxy-from-env' {
  /** The proxy URL for a target URL per HTTP(S)_PROXY, ALL_PROXY and NO_PROXY, or '' for none. */
  export function getProxyForUrl(url: string): string;
}
