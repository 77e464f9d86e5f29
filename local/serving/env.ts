/**
 * A container's environment as the kubelet builds it: `envFrom` sources first (later ones win),
 * then `env` in order (a `$(NAME)` in a value expands to a variable defined before it, `$$` is a
 * literal `$`). Values come from literals, Secrets (read from the API server), ConfigMaps (given
 * as data: the development API server serves none) and the Downward API fields a pod has.
 * A required source that is missing fails the whole start with the kubelet's message, as
 * CreateContainerConfigError does; an optional one is skipped.
 */
import type { Container, EnvVar } from './types.js';

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

type EnvFromSource = NonNullable<Container['envFrom']>[number];
type KeyRef = NonNullable<NonNullable<EnvVar['valueFrom']>['secretKeyRef']>;

/** Where one container's values come from; each Secret is read once per container. */
interface EnvLookup {
  namespace: string;
  secret(name: string): Promise<Readonly<Record<string, string>> | undefined>;
  configMap(name: string): Readonly<Record<string, string>> | undefined;
  fields: Readonly<Record<string, string>>;
}

function envLookup(sources: EnvSources): EnvLookup {
  const secrets = new Map<string, Promise<Readonly<Record<string, string>> | undefined>>();
  return {
    namespace: sources.namespace,
    secret(name) {
      let found = secrets.get(name);
      if (found === undefined) {
        found = sources.readSecret(name);
        secrets.set(name, found);
      }
      return found;
    },
    configMap: (name) =>
      Object.hasOwn(sources.configMaps, name) ? sources.configMaps[name] : undefined,
    fields: sources.fields,
  };
}

/** Adds one envFrom source's keys (prefixed) to env. */
async function applyEnvFrom(
  from: EnvFromSource,
  lookup: EnvLookup,
  env: Record<string, string>,
): Promise<void> {
  const prefix = from.prefix ?? '';
  let data: Readonly<Record<string, string>> | undefined;
  if (from.secretRef !== undefined) {
    data = await lookup.secret(from.secretRef.name);
    if (data === undefined && from.secretRef.optional !== true)
      throw new ContainerConfigError(`secret "${from.secretRef.name}" not found`);
  } else if (from.configMapRef !== undefined) {
    data = lookup.configMap(from.configMapRef.name);
    if (data === undefined && from.configMapRef.optional !== true)
      throw new ContainerConfigError(`configmap "${from.configMapRef.name}" not found`);
  }
  for (const [key, value] of Object.entries(data ?? {})) {
    if (envName.test(prefix + key)) env[prefix + key] = value;
  }
}

/** A secretKeyRef's or configMapKeyRef's value; undefined when optional and missing. */
function keyRefValue(
  ref: KeyRef,
  data: Readonly<Record<string, string>> | undefined,
  kind: 'Secret' | 'ConfigMap',
  namespace: string,
): string | undefined {
  const value = data !== undefined && Object.hasOwn(data, ref.key) ? data[ref.key] : undefined;
  if (value !== undefined || ref.optional === true) return value;
  throw new ContainerConfigError(
    data === undefined
      ? `${kind.toLowerCase()} "${ref.name}" not found`
      : `couldn't find key ${ref.key} in ${kind} ${namespace}/${ref.name}`,
  );
}

/** A Downward API field's value; only the fields the pod has are served. */
function fieldValue(name: string, path: string, fields: Readonly<Record<string, string>>): string {
  if (!Object.hasOwn(fields, path)) {
    throw new ContainerConfigError(
      `env ${name}: fieldPath "${path}" is not served locally (served: ${Object.keys(fields).join(', ')})`,
    );
  }
  return fields[path]!;
}

/** Sets (or, for a missing optional source, leaves) one env entry. */
async function applyEnvVar(
  variable: EnvVar,
  lookup: EnvLookup,
  env: Record<string, string>,
): Promise<void> {
  const from = variable.valueFrom;
  let value: string | undefined;
  if (from === undefined) {
    value = expand(variable.value ?? '', env);
  } else if (from.secretKeyRef !== undefined) {
    const ref = from.secretKeyRef;
    value = keyRefValue(ref, await lookup.secret(ref.name), 'Secret', lookup.namespace);
  } else if (from.configMapKeyRef !== undefined) {
    const ref = from.configMapKeyRef;
    value = keyRefValue(ref, lookup.configMap(ref.name), 'ConfigMap', lookup.namespace);
  } else if (from.fieldRef !== undefined) {
    value = fieldValue(variable.name, from.fieldRef.fieldPath, lookup.fields);
  } else {
    throw new ContainerConfigError(
      `env ${variable.name}: only secretKeyRef, configMapKeyRef and fieldRef are served locally`,
    );
  }
  if (value !== undefined) env[variable.name] = value;
}

async function resolveContainerEnv(
  container: Container,
  sources: EnvSources,
): Promise<Record<string, string>> {
  const lookup = envLookup(sources);
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) await applyEnvFrom(from, lookup, env);
  for (const variable of container.env ?? []) await applyEnvVar(variable, lookup, env);
  return env;
}

export { ContainerConfigError, resolveContainerEnv, secretData };
export type { EnvSources };
