/**
 * Cluster-local Service URLs in a container's environment, made local: in a cluster
 * `http://<name>.<namespace>.svc.cluster.local` (or `.svc`, or `<name>.<namespace>` through the
 * pod's DNS search path) reaches the Service's route; locally it is that Service's stable route
 * URL, with the URL's path, query and fragment kept (the port is the route's).
 */

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

/** `env` with every value that is a cluster-local Service URL replaced by its route's URL. */
function rewriteServiceUrls(
  env: Readonly<Record<string, string>>,
  routes: ServiceRoutes,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const service = parseServiceUrl(value);
    out[key] =
      service !== undefined && (service.qualified || routes.isNamespace(service.namespace))
        ? `${routes.routeUrl(service.namespace, service.name)}${service.rest}`
        : value;
  }
  return out;
}

export { parseServiceUrl, rewriteServiceUrls };
export type { ServiceRoutes, ServiceUrl };
