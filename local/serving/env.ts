/**
 * A container's environment as the kubelet builds it: `envFrom` sources first (later ones win),
 * then `env` in order (a `$(NAME)` in a value expands to a variable defined before it, `$$` is a
 * literal `$`). Values come from literals, Secrets (read from the API server), ConfigMaps (given
 * as data: the development API server serves none) and the Downward API fields a pod has.
 * A required source that is missing fails the whole start with the kubelet's message, as
 * CreateContainerConfigError does; an optional one is skipped.
 */
import type { Container } from './types.js';

/** The kubelet's CreateContainerConfigError: the container cannot be started as specified. */
class ContainerConfigError extends Error {
  override readonly name = 'ContainerConfigError';
}

interface EnvSources {
  namespace: string;
  /** A Secret's data, decoded; undefined when the Secret does not exist. */
  readSecret(name: string): Promise<Readonly<Record<string, string>> | undefined>;
  /** ConfigMaps by name (in every namespace), key to value. */
  configMaps: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /** Downward API values by fieldPath (metadata.name, spec.nodeName, ...). */
  fields: Readonly<Record<string, string>>;
}

/** Names envFrom may import; the kubelet skips other keys. */
const envName = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/** A Secret object's data: base64 `data`, with `stringData` (unencoded) winning. */
function secretData(secret: {
  data?: Record<string, string> | undefined;
  stringData?: Record<string, string> | undefined;
}): Record<string, string> {
  const data: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data ?? {}))
    data[key] = Buffer.from(value, 'base64').toString('utf8');
  return { ...data, ...(secret.stringData ?? {}) };
}

/** Kubernetes' $(VAR) expansion against the variables defined so far. */
function expand(value: string, defined: Readonly<Record<string, string>>): string {
  return value.replace(/\$\$|\$\(([-._a-zA-Z0-9]+)\)/g, (match, name: string | undefined) => {
    if (name === undefined) return '$';
    return Object.hasOwn(defined, name) ? defined[name]! : match;
  });
}

async function resolveContainerEnv(
  container: Container,
  sources: EnvSources,
): Promise<Record<string, string>> {
  const secrets = new Map<string, Promise<Readonly<Record<string, string>> | undefined>>();
  const secret = (name: string) => {
    let found = secrets.get(name);
    if (found === undefined) {
      found = sources.readSecret(name);
      secrets.set(name, found);
    }
    return found;
  };
  const configMap = (name: string) =>
    Object.hasOwn(sources.configMaps, name) ? sources.configMaps[name] : undefined;
  const { namespace } = sources;
  const env: Record<string, string> = {};

  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    let data: Readonly<Record<string, string>> | undefined;
    if (from.secretRef !== undefined) {
      data = await secret(from.secretRef.name);
      if (data === undefined && from.secretRef.optional !== true)
        throw new ContainerConfigError(`secret "${from.secretRef.name}" not found`);
    } else if (from.configMapRef !== undefined) {
      data = configMap(from.configMapRef.name);
      if (data === undefined && from.configMapRef.optional !== true)
        throw new ContainerConfigError(`configmap "${from.configMapRef.name}" not found`);
    }
    for (const [key, value] of Object.entries(data ?? {})) {
      if (envName.test(prefix + key)) env[prefix + key] = value;
    }
  }

  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (from === undefined) {
      env[variable.name] = expand(variable.value ?? '', env);
    } else if (from.secretKeyRef !== undefined) {
      const ref = from.secretKeyRef;
      const data = await secret(ref.name);
      const value = data !== undefined && Object.hasOwn(data, ref.key) ? data[ref.key] : undefined;
      if (value !== undefined) env[variable.name] = value;
      else if (ref.optional !== true) {
        throw new ContainerConfigError(
          data === undefined
            ? `secret "${ref.name}" not found`
            : `couldn't find key ${ref.key} in Secret ${namespace}/${ref.name}`,
        );
      }
    } else if (from.configMapKeyRef !== undefined) {
      const ref = from.configMapKeyRef;
      const data = configMap(ref.name);
      const value = data !== undefined && Object.hasOwn(data, ref.key) ? data[ref.key] : undefined;
      if (value !== undefined) env[variable.name] = value;
      else if (ref.optional !== true) {
        throw new ContainerConfigError(
          data === undefined
            ? `configmap "${ref.name}" not found`
            : `couldn't find key ${ref.key} in ConfigMap ${namespace}/${ref.name}`,
        );
      }
    } else if (from.fieldRef !== undefined) {
      const path = from.fieldRef.fieldPath;
      if (!Object.hasOwn(sources.fields, path)) {
        throw new ContainerConfigError(
          `env ${variable.name}: fieldPath "${path}" is not served locally (served: ${Object.keys(sources.fields).join(', ')})`,
        );
      }
      env[variable.name] = sources.fields[path]!;
    } else {
      throw new ContainerConfigError(
        `env ${variable.name}: only secretKeyRef, configMapKeyRef and fieldRef are served locally`,
      );
    }
  }
  return env;
}

export { ContainerConfigError, resolveContainerEnv, secretData };
export type { EnvSources };
