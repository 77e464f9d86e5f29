/**
 * Cluster-local Service URLs in a container's environment, made local: in a cluster
 * `http://<name>.<namespace>.svc.cluster.local` (or `.svc`, or `<name>.<namespace>` through the
 * pod's DNS search path) reaches the Service's route; locally it is that Service's stable route
 * URL, with the URL's path, query and fragment kept (the port is the route's).
 */
import { isDeepStrictEqual } from 'node:util';

/** A DNS-1123 label, as Service and namespace names are. */
const label = '[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?';
const clusterUrl = new RegExp(
  `^http://(${label})\\.(${label})(\\.svc(?:\\.cluster\\.local)?)?\\.?(?::\\d{1,5})?([/?#].*)?$`,
  'is',
);

interface ServiceUrl {
  namespace: string;
  name: string;
  /** The path, query and fragment, as written ('' for none). */
  rest: string;
  /** `.svc` or `.svc.cluster.local`: unambiguous. `<name>.<namespace>` may be any host. */
  qualified: boolean;
}

/** The Service a cluster-local http URL names, or undefined for any other value. */
function parseServiceUrl(value: string): ServiceUrl | undefined {
  const match = clusterUrl.exec(value);
  if (match === null) return undefined;
  return {
    name: match[1]!.toLowerCase(),
    namespace: match[2]!.toLowerCase(),
    rest: match[4] ?? '',
    qualified: match[3] !== undefined,
  };
}

interface ServiceRoutes {
  /** The stable local URL of the Service's route. */
  routeUrl(namespace: string, name: string): string;
  /**
   * Whether `<name>.<namespace>` should be read as a Service: true for a namespace the
   * supervisor knows, so `http://example.com` is not taken for Service "example" in "com".
   */
  isNamespace(namespace: string): boolean;
}

/** The route URL for `value` when it is a cluster-local Service URL, else undefined. */
function rewriteOne(value: string, routes: ServiceRoutes): string | undefined {
  const service = parseServiceUrl(value);
  return service !== undefined && (service.qualified || routes.isNamespace(service.namespace))
    ? `${routes.routeUrl(service.namespace, service.name)}${service.rest}`
    : undefined;
}

/** `json` with every string inside it that is a Service URL rewritten (keys are left alone). */
function rewriteInJson(json: unknown, routes: ServiceRoutes): unknown {
  if (typeof json === 'string') return rewriteOne(json, routes) ?? json;
  if (Array.isArray(json)) return json.map((item) => rewriteInJson(item, routes));
  if (typeof json === 'object' && json !== null) {
    return Object.fromEntries(Object.entries(json).map(([k, v]) => [k, rewriteInJson(v, routes)]));
  }
  return json;
}

/**
 * A JSON object or array (e.g. an MLGraph's plan in MLGRAPH_GRAPH, whose node URLs are
 * cluster-local) with the Service URLs inside it rewritten; undefined for any other value, or
 * when nothing inside is one (the value is then kept byte for byte).
 */
function rewriteJsonValue(value: string, routes: ServiceRoutes): string | undefined {
  const start = value.trimStart()[0];
  if (start !== '{' && start !== '[') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  const rewritten = rewriteInJson(parsed, routes);
  return isDeepStrictEqual(parsed, rewritten) ? undefined : JSON.stringify(rewritten);
}

/**
 * `env` with every value that is a cluster-local Service URL replaced by its route's URL, and
 * with the Service URLs inside a value that is a JSON object or array replaced likewise.
 */
function rewriteServiceUrls(
  env: Readonly<Record<string, string>>,
  routes: ServiceRoutes,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    out[key] = rewriteOne(value, routes) ?? rewriteJsonValue(value, routes) ?? value;
  }
  return out;
}

export { parseServiceUrl, rewriteServiceUrls };
export type { ServiceRoutes, ServiceUrl };
