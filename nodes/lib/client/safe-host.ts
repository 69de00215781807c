/** scheme://host:port of a URL, for messages: never a path, query or credentials. */
export function safeHost(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return 'the configured URL';
  }
}
