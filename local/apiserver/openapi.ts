/**
 * OpenAPI documents of the served kinds, shaped as kube-apiserver serves them, because kubectl
 * reads them before it acts:
 *
 * - `/openapi/v3` lists every group-version with a `serverRelativeURL` carrying `?hash=` (the
 *   uppercase hex SHA-512 of the document's JSON, kube-openapi's ETag), and
 *   `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>` are OpenAPI 3.0 documents.
 *   `kubectl create/apply/replace` look there for a PATCH operation whose
 *   `x-kubernetes-group-version-kind` is the object's and which takes a `fieldValidation` query
 *   parameter (cli-runtime query_param_verifier_v3.go); found, kubectl leaves validation to the
 *   server (`?fieldValidation=Strict`). `kubectl explain` finds the kind from a path's operation
 *   and then the `components.schemas` entry whose `x-kubernetes-group-version-kind` list holds it
 *   (kubectl pkg/explain/v2/templates/plaintext.tmpl).
 * - `/openapi/v2` is the Swagger 2.0 document of everything, with the custom resources' schemas
 *   converted as apiextensions-apiserver converts them for v2. kubectl asks for v2 in protobuf
 *   (kubectl before 1.27 always, later ones when v3 fails or for `explain
 *   --output=plaintext-openapiv2`): openapi-v2-proto.ts encodes this document for it; the JSON
 *   is for the other tools that read it.
 *
 * Names follow kube: Go package paths for built-in types (`io.k8s.api.core.v1.Node`), the reversed
 * group for custom resources (`io.edgeai.v1alpha1.JointInferenceService`). The paths are the
 * routes the server serves (no deletecollection, no deprecated /watch/ paths); the query
 * parameters are the ones kube lists for each verb (its option structs), whether or not this
 * server honours each of them. Responses and bodies name only the media types served: JSON, and
 * JSON merge patch for PATCH.
 */
import { createHash } from 'node:crypto';
import type { ServedType } from './types.js';

/** A JSON Schema (OpenAPI flavour) node. */
type Schema = Record<string, unknown>;
type OpenApiVersion = 'v2' | 'v3';

// ---------------------------------------------------------------------------------------------
// Names and schema helpers. Definitions are written once with v2 refs (`#/definitions/...`, a
// `$ref` may carry a description beside it), as kube's builders do; v3 rewrites them below.

const v2Prefix = '#/definitions/';
const v3Prefix = '#/components/schemas/';
const meta = (name: string) => `io.k8s.apimachinery.pkg.apis.meta.v1.${name}`;
const core = (name: string) => `io.k8s.api.core.v1.${name}`;

/** kube's definition name of a kind (apiextensions-apiserver builder.go gvkToModelName). */
function definitionName(group: string, version: string, kind: string): string {
  if (group === '') return `io.k8s.api.core.${version}.${kind}`;
  return `${group.split('.').reverse().join('.')}.${version}.${kind}`;
}

const ref = (name: string, description?: string): Schema =>
  description === undefined
    ? { $ref: `${v2Prefix}${name}` }
    : { description, $ref: `${v2Prefix}${name}` };
const string = (description: string, extra: Schema = {}): Schema => ({
  description,
  type: 'string',
  ...extra,
});
const integer = (description: string, format = 'int64'): Schema => ({
  description,
  type: 'integer',
  format,
});
const boolean = (description: string): Schema => ({ description, type: 'boolean' });
const stringMap = (description: string): Schema => ({
  description,
  type: 'object',
  additionalProperties: { type: 'string' },
});
const stringList = (description: string, extra: Schema = {}): Schema => ({
  description,
  type: 'array',
  items: { type: 'string' },
  ...extra,
});
const listOf = (name: string, description: string, extra: Schema = {}): Schema => ({
  description,
  type: 'array',
  items: ref(name),
  ...extra,
});
const object = (description: string, properties: Record<string, Schema>, extra: Schema = {}) => ({
  description,
  type: 'object',
  properties,
  ...extra,
});

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Applies `visit` to a schema and then, on its result, to every subschema beneath it. */
function mapSchema(schema: Schema, visit: (s: Schema) => Schema): Schema {
  const out = { ...visit(schema) };
  const map = (s: unknown) => (isSchema(s) ? mapSchema(s, visit) : s);
  if (isSchema(out['properties'])) {
    out['properties'] = Object.fromEntries(
      Object.entries(out['properties']).map(([k, v]) => [k, map(v)]),
    );
  }
  for (const key of ['items', 'additionalProperties', 'not', 'allOf', 'anyOf', 'oneOf']) {
    const child = out[key];
    if (child !== undefined) out[key] = Array.isArray(child) ? child.map(map) : map(child);
  }
  return out;
}

/** Groups by key, keeping first-seen order (Map.groupBy is not in Node 20). */
function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

function without(schema: Schema, ...keys: string[]): Schema {
  return Object.fromEntries(Object.entries(schema).filter(([k]) => !keys.includes(k)));
}

// ---------------------------------------------------------------------------------------------
// Built-in definitions: the meta/v1 types every document refers to, and the core/v1 types of the
// served core kinds. Descriptions are kube's (the types' SwaggerDoc); core types describe what
// the project uses, and NodeStatus, which is far larger in kube, is marked open.

const conventions =
  'https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md';
const typeMeta = {
  apiVersion: string(
    `APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: ${conventions}#resources`,
  ),
  kind: string(
    `Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: ${conventions}#types-kinds`,
  ),
};
const objectMetadata = ref(
  meta('ObjectMeta'),
  `Standard object's metadata. More info: ${conventions}#metadata`,
);
const listMetadata = ref(
  meta('ListMeta'),
  `Standard list metadata. More info: ${conventions}#types-kinds`,
);
const dryRun =
  'When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed';
const nameDoc = 'https://kubernetes.io/docs/concepts/overview/working-with-objects/names';

const metaDefinitions: Record<string, Schema> = {
  [meta('ObjectMeta')]: object(
    'ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.',
    {
      annotations: stringMap(
        'Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata. They are not queryable and should be preserved when modifying objects. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations',
      ),
      creationTimestamp: ref(
        meta('Time'),
        `CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: ${conventions}#metadata`,
      ),
      deletionGracePeriodSeconds: integer(
        'Number of seconds allowed for this object to gracefully terminate before it will be removed from the system. Only set when deletionTimestamp is also set. May only be shortened. Read-only.',
      ),
      deletionTimestamp: ref(
        meta('Time'),
        `DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. This field is set by the server when a graceful deletion is requested by the user, and is not directly settable by a client. The resource is expected to be deleted (no longer visible from resource lists, and not reachable by name) after the time in this field, once the finalizers list is empty. As long as the finalizers list contains items, deletion is blocked. Once the deletionTimestamp is set, this value may not be unset or be set further into the future, although it may be shortened or the resource may be deleted prior to this time.\n\nPopulated by the system when a graceful deletion is requested. Read-only. More info: ${conventions}#metadata`,
      ),
      finalizers: stringList(
        'Must be empty before the object is deleted from the registry. Each entry is an identifier for the responsible component that will remove the entry from the list. If the deletionTimestamp of the object is non-nil, entries in this list can only be removed. Finalizers may be processed and removed in any order.  Order is NOT enforced because it introduces significant risk of stuck finalizers.',
        { 'x-kubernetes-list-type': 'set', 'x-kubernetes-patch-strategy': 'merge' },
      ),
      generateName: string(
        `GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided. If this field is used, the name returned to the client will be different than the name passed. This value will also be combined with a unique suffix. The provided value has the same validation rules as the Name field, and may be truncated by the length of the suffix required to make the value unique on the server.\n\nIf this field is specified and the generated name exists, the server will return a 409.\n\nApplied only if Name is not specified. More info: ${conventions}#idempotency`,
      ),
      generation: integer(
        'A sequence number representing a specific generation of the desired state. Populated by the system. Read-only.',
      ),
      labels: stringMap(
        'Map of string keys and values that can be used to organize and categorize (scope and select) objects. May match selectors of replication controllers and services. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels',
      ),
      name: string(
        `Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: ${nameDoc}#names`,
      ),
      namespace: string(
        'Namespace defines the space within which each name must be unique. An empty namespace is equivalent to the "default" namespace, but "default" is the canonical representation. Not all objects are required to be scoped to a namespace - the value of this field for those objects will be empty.\n\nMust be a DNS_LABEL. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces',
      ),
      ownerReferences: listOf(
        meta('OwnerReference'),
        'List of objects depended by this object. If ALL objects in the list have been deleted, this object will be garbage collected. If this object is managed by a controller, then an entry in this list will point to this controller, with the controller field set to true. There cannot be more than one managing controller.',
        {
          'x-kubernetes-list-map-keys': ['uid'],
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-patch-merge-key': 'uid',
          'x-kubernetes-patch-strategy': 'merge',
        },
      ),
      resourceVersion: string(
        `An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed. May be used for optimistic concurrency, change detection, and the watch operation on a resource or set of resources. Clients must treat these values as opaque and passed unmodified back to the server. They may only be valid for a particular resource or set of resources.\n\nPopulated by the system. Read-only. Value must be treated as opaque by clients and . More info: ${conventions}#concurrency-control-and-consistency`,
      ),
      uid: string(
        `UID is the unique in time and space value for this object. It is typically generated by the server on successful creation of a resource and is not allowed to change on PUT operations.\n\nPopulated by the system. Read-only. More info: ${nameDoc}#uids`,
      ),
    },
  ),
  [meta('OwnerReference')]: object(
    'OwnerReference contains enough information to let you identify an owning object. An owning object must be in the same namespace as the dependent, or be cluster-scoped, so there is no namespace field.',
    {
      apiVersion: string('API version of the referent.'),
      blockOwnerDeletion: boolean(
        'If true, AND if the owner has the "foregroundDeletion" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed. Defaults to false.',
      ),
      controller: boolean('If true, this reference points to the managing controller.'),
      kind: string(`Kind of the referent. More info: ${conventions}#types-kinds`),
      name: string(`Name of the referent. More info: ${nameDoc}#names`),
      uid: string(`UID of the referent. More info: ${nameDoc}#uids`),
    },
    { required: ['apiVersion', 'kind', 'name', 'uid'], 'x-kubernetes-map-type': 'atomic' },
  ),
  [meta('ListMeta')]: object(
    'ListMeta describes metadata that synthetic resources must have, including lists and various status objects. A resource may have only one of {ObjectMeta, ListMeta}.',
    {
      continue: string(
        'continue may be set if the user set a limit on the number of items returned, and indicates that the server has more data available. The value is opaque and may be used to issue another request to the endpoint that served this list to retrieve the next set of available objects.',
      ),
      remainingItemCount: integer(
        'remainingItemCount is the number of subsequent items in the list which are not included in this list response.',
      ),
      resourceVersion: string(
        `String that identifies the server's internal version of this object that can be used by clients to determine when objects have changed. Value must be treated as opaque by clients and passed unmodified back to the server. Populated by the system. Read-only. More info: ${conventions}#concurrency-control-and-consistency`,
      ),
      selfLink: string(
        'Deprecated: selfLink is a legacy read-only field that is no longer populated by the system.',
      ),
    },
  ),
  [meta('Time')]: string(
    'Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.',
    { format: 'date-time' },
  ),
  [meta('MicroTime')]: string('MicroTime is version of Time with microsecond level precision.', {
    format: 'date-time',
  }),
  [meta('Status')]: object(
    "Status is a return value for calls that don't return other objects.",
    {
      ...typeMeta,
      code: integer('Suggested HTTP return code for this status, 0 if not set.', 'int32'),
      details: ref(
        meta('StatusDetails'),
        'Extended data associated with the reason.  Each reason may define its own extended details. This field is optional and the data returned is not guaranteed to conform to any schema except that defined by the reason type.',
      ),
      message: string('A human-readable description of the status of this operation.'),
      metadata: listMetadata,
      reason: string(
        'A machine-readable description of why this operation is in the "Failure" status. If this value is empty there is no information available. A Reason clarifies an HTTP status code but does not override it.',
      ),
      status: string(
        `Status of the operation. One of: "Success" or "Failure". More info: ${conventions}#spec-and-status`,
      ),
    },
    { 'x-kubernetes-group-version-kind': [{ group: '', kind: 'Status', version: 'v1' }] },
  ),
  [meta('StatusDetails')]: object(
    'StatusDetails is a set of additional properties that MAY be set by the server to provide additional information about a response. The Reason field of a Status object defines what attributes will be set. Clients must ignore fields that do not match the defined type of each attribute, and should assume that any attribute may be empty, invalid, or under defined.',
    {
      causes: listOf(
        meta('StatusCause'),
        'The Causes array includes more details associated with the StatusReason failure. Not all StatusReasons may provide detailed causes.',
        { 'x-kubernetes-list-type': 'atomic' },
      ),
      group: string('The group attribute of the resource associated with the status StatusReason.'),
      kind: string(
        `The kind attribute of the resource associated with the status StatusReason. On some operations may differ from the requested resource Kind. More info: ${conventions}#types-kinds`,
      ),
      name: string(
        'The name attribute of the resource associated with the status StatusReason (when there is a single name which can be described).',
      ),
      retryAfterSeconds: integer(
        'If specified, the time in seconds before the operation should be retried. Some errors may indicate the client must take an alternate action - for those errors this field may indicate how long to wait before taking the alternate action.',
        'int32',
      ),
      uid: string(
        `UID of the resource. (when there is a single resource which can be described). More info: ${nameDoc}#uids`,
      ),
    },
  ),
  [meta('StatusCause')]: object(
    'StatusCause provides more information about an api.Status failure, including cases when multiple errors are encountered.',
    {
      field: string(
        'The field of the resource that has caused this error, as named by its JSON serialization. May include dot and postfix notation for nested attributes. Arrays are zero-indexed.  Fields may appear more than once in an array of causes due to fields having multiple errors. Optional.',
      ),
      message: string(
        'A human-readable description of the cause of the error.  This field may be presented as-is to a reader.',
      ),
      reason: string(
        'A machine-readable description of the cause of the error. If this value is empty there is no information available.',
      ),
    },
  ),
  [meta('DeleteOptions')]: object('DeleteOptions may be provided when deleting an API object.', {
    ...typeMeta,
    dryRun: stringList(dryRun, { 'x-kubernetes-list-type': 'atomic' }),
    gracePeriodSeconds: integer(
      'The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.',
    ),
    orphanDependents: boolean(
      'Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the "orphan" finalizer will be added to/removed from the object\'s finalizers list. Either this field or PropagationPolicy may be set, but not both.',
    ),
    preconditions: ref(
      meta('Preconditions'),
      'Must be fulfilled before a deletion is carried out. If not possible, a 409 Conflict status will be returned.',
    ),
    propagationPolicy: string(
      "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
  }),
  [meta('Preconditions')]: object(
    'Preconditions must be fulfilled before an operation (update, delete, etc.) is carried out.',
    {
      resourceVersion: string('Specifies the target ResourceVersion'),
      uid: string('Specifies the target UID.'),
    },
  ),
  [meta('Patch')]: {
    description:
      'Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.',
    type: 'object',
  },
};

/** The core/v1 types below the served core kinds. */
const coreDefinitions: Record<string, Schema> = {
  [core('NodeSpec')]: object('NodeSpec describes the attributes that a node is created with.', {
    externalID: string(
      'Deprecated. Not all kubelets will set this field. Remove field after 1.13. see: https://issues.k8s.io/61966',
    ),
    podCIDR: string('PodCIDR represents the pod IP range assigned to the node.'),
    podCIDRs: stringList(
      'podCIDRs represents the IP ranges assigned to the node for usage by Pods on that node. If this field is specified, the 0th entry must match the podCIDR field. It may contain at most 1 value for each of IPv4 and IPv6.',
      { 'x-kubernetes-list-type': 'set', 'x-kubernetes-patch-strategy': 'merge' },
    ),
    providerID: string(
      'ID of the node assigned by the cloud provider in the format: <ProviderName>://<ProviderSpecificNodeID>',
    ),
    taints: listOf(core('Taint'), "If specified, the node's taints.", {
      'x-kubernetes-list-type': 'atomic',
    }),
    unschedulable: boolean(
      'Unschedulable controls node schedulability of new pods. By default, node is schedulable. More info: https://kubernetes.io/docs/concepts/nodes/node/#manual-node-administration',
    ),
  }),
  [core('Taint')]: object(
    'The node this Taint is attached to has the "effect" on any pod that does not tolerate the Taint.',
    {
      effect: string(
        'Required. The effect of the taint on pods that do not tolerate the taint. Valid effects are NoSchedule, PreferNoSchedule and NoExecute.',
        { enum: ['NoExecute', 'NoSchedule', 'PreferNoSchedule'] },
      ),
      key: string('Required. The taint key to be applied to a node.'),
      timeAdded: ref(meta('Time'), 'TimeAdded represents the time at which the taint was added.'),
      value: string('The taint value corresponding to the taint key.'),
    },
    { required: ['key', 'effect'] },
  ),
  // kube's NodeStatus has many more fields (capacity, images, volumes, ...): open, not invented.
  [core('NodeStatus')]: object(
    'NodeStatus is information about the current status of a node.',
    {
      addresses: listOf(
        core('NodeAddress'),
        'List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses',
        {
          'x-kubernetes-list-map-keys': ['type'],
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-patch-merge-key': 'type',
          'x-kubernetes-patch-strategy': 'merge',
        },
      ),
      conditions: listOf(
        core('NodeCondition'),
        'Conditions is an array of current observed node conditions. More info: https://kubernetes.io/docs/reference/node/node-status/#condition',
        {
          'x-kubernetes-list-map-keys': ['type'],
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-patch-merge-key': 'type',
          'x-kubernetes-patch-strategy': 'merge',
        },
      ),
      nodeInfo: {
        description:
          'Set of ids/uuids to uniquely identify the node. More info: https://kubernetes.io/docs/reference/node/node-status/#info',
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
      },
    },
    { 'x-kubernetes-preserve-unknown-fields': true },
  ),
  [core('NodeAddress')]: object(
    "NodeAddress contains information for the node's address.",
    {
      address: string('The node address.'),
      type: string('Node address type, one of Hostname, ExternalIP or InternalIP.'),
    },
    { required: ['type', 'address'] },
  ),
  [core('NodeCondition')]: object(
    'NodeCondition contains condition information for a node.',
    {
      lastHeartbeatTime: ref(meta('Time'), 'Last time we got an update on a given condition.'),
      lastTransitionTime: ref(
        meta('Time'),
        'Last time the condition transit from one status to another.',
      ),
      message: string('Human readable message indicating details about last transition.'),
      reason: string("(brief) reason for the condition's last transition."),
      status: string('Status of the condition, one of True, False, Unknown.'),
      type: string('Type of node condition.'),
    },
    { required: ['type', 'status'] },
  ),
  [core('ObjectReference')]: object(
    'ObjectReference contains enough information to let you inspect or modify the referred object.',
    {
      apiVersion: string('API version of the referent.'),
      fieldPath: string(
        'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].',
      ),
      kind: string(`Kind of the referent. More info: ${conventions}#types-kinds`),
      name: string(`Name of the referent. More info: ${nameDoc}/#names`),
      namespace: string(
        'Namespace of the referent. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/',
      ),
      resourceVersion: string(
        `Specific resourceVersion to which this reference is made, if any. More info: ${conventions}#concurrency-control-and-consistency`,
      ),
      uid: string(`UID of the referent. More info: ${nameDoc}/#uids`),
    },
    { 'x-kubernetes-map-type': 'atomic' },
  ),
  [core('EventSource')]: object('EventSource contains information for an event.', {
    component: string('Component from which the event is generated.'),
    host: string('Node name on which the event is generated.'),
  }),
  [core('EventSeries')]: object(
    'EventSeries contain information on series of events, i.e. thing that was/is happening continuously for some time.',
    {
      count: integer('Number of occurrences in this series up to the last heartbeat time', 'int32'),
      lastObservedTime: ref(meta('MicroTime'), 'Time of the last occurrence observed'),
    },
  ),
};

interface CoreKind {
  schema: Schema;
  /** The list kind's description and its items' description. */
  list: readonly [string, string];
}

/** The served core kinds, by kind (spec/status refs point into coreDefinitions). */
const coreKinds: Record<string, CoreKind> = {
  Node: {
    schema: object(
      'Node is a worker node in Kubernetes. Each node will have a unique identifier in the cache (i.e. in etcd).',
      {
        ...typeMeta,
        metadata: objectMetadata,
        spec: ref(
          core('NodeSpec'),
          `Spec defines the behavior of a node. ${conventions}#spec-and-status`,
        ),
        status: ref(
          core('NodeStatus'),
          `Most recently observed status of the node. Populated by the system. Read-only. More info: ${conventions}#spec-and-status`,
        ),
      },
    ),
    list: [
      'NodeList is the whole list of all Nodes which have been registered with master.',
      'List of nodes',
    ],
  },
  Secret: {
    schema: object(
      'Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.',
      {
        ...typeMeta,
        data: {
          description:
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
          type: 'object',
          additionalProperties: { type: 'string', format: 'byte' },
        },
        immutable: boolean(
          'Immutable, if set to true, ensures that data stored in the Secret cannot be updated (only object metadata can be modified). If not set to true, the field can be modified at any time. Defaulted to nil.',
        ),
        metadata: objectMetadata,
        stringData: stringMap(
          'stringData allows specifying non-binary secret data in string form. It is provided as a write-only input field for convenience. All keys and values are merged into the data field on write, overwriting any existing values. The stringData field is never output when reading from the API.',
        ),
        type: string(
          'Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types',
        ),
      },
    ),
    list: [
      'SecretList is a list of Secret.',
      'Items is a list of secret objects. More info: https://kubernetes.io/docs/concepts/configuration/secret',
    ],
  },
  Event: {
    schema: object(
      'Event is a report of an event somewhere in the cluster.  Events have a limited retention time and triggers and messages may evolve with time.  Event consumers should not rely on the timing of an event with a given Reason reflecting a consistent underlying trigger, or the continued existence of events with that Reason.  Events should be treated as informative, best-effort, supplemental data.',
      {
        ...typeMeta,
        action: string('What action was taken/failed regarding to the Regarding object.'),
        count: integer('The number of times this event has occurred.', 'int32'),
        eventTime: ref(meta('MicroTime'), 'Time when this Event was first observed.'),
        firstTimestamp: ref(
          meta('Time'),
          'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
        ),
        involvedObject: ref(core('ObjectReference'), 'The object that this event is about.'),
        lastTimestamp: ref(
          meta('Time'),
          'The time at which the most recent occurrence of this event was recorded.',
        ),
        message: string('A human-readable description of the status of this operation.'),
        metadata: objectMetadata,
        reason: string(
          "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        related: ref(
          core('ObjectReference'),
          'Optional secondary object for more complex actions.',
        ),
        reportingComponent: string(
          'Name of the controller that emitted this Event, e.g. `kubernetes.io/kubelet`.',
        ),
        reportingInstance: string('ID of the controller instance, e.g. `kubelet-xyzf`.'),
        series: ref(
          core('EventSeries'),
          "Data about the Event series this event represents or nil if it's a singleton Event.",
        ),
        source: ref(
          core('EventSource'),
          'The component reporting this event. Should be a short machine understandable string.',
        ),
        type: string(
          'Type of this event (Normal, Warning), new types could be added in the future',
        ),
      },
      { required: ['metadata', 'involvedObject'] },
    ),
    list: ['EventList is a list of events.', 'List of events'],
  },
};

/**
 * Served kinds with no schema of their own in types.ts, described here as their owners describe
 * them (Knative's config/core/300-resources/service.yaml), spec and status open: this server keeps
 * whatever they hold.
 */
const describedSchemas: Record<string, Schema> = {
  'serving.knative.dev/v1/Service': object(
    "Service acts as a top-level container that manages a Route and Configuration\nwhich implement a network service. Service exists to provide a singular\nabstraction which can be access controlled, reasoned about, and which\nencapsulates software lifecycle decisions such as rollout policy and\nteam resource ownership. Service acts only as an orchestrator of the\nunderlying Routes and Configurations (much as a kubernetes Deployment\norchestrates ReplicaSets), and its usage is optional but recommended.\n\nThe Service's controller will track the statuses of its owned Configuration\nand Route, reflecting their statuses and conditions as its own.\n\nSee also: https://github.com/knative/serving/blob/main/docs/spec/overview.md#service",
    {
      spec: {
        description:
          'ServiceSpec represents the configuration for the Service object.\nA Service\'s specification is the union of the specifications for a Route\nand Configuration.  The Service restricts what can be expressed in these\nfields, e.g. the Route must reference the provided Configuration;\nhowever, these limitations also enable friendlier defaulting,\ne.g. Route never needs a Configuration name, and may be defaulted to\nthe appropriate "run latest" spec.',
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
      },
      status: {
        description: 'ServiceStatus represents the Status stanza of the Service resource.',
        type: 'object',
        'x-kubernetes-preserve-unknown-fields': true,
      },
    },
  ),
};

// ---------------------------------------------------------------------------------------------
// Kinds and their lists.

const gvk = (group: string, version: string, kind: string) => ({ group, kind, version });
const gvkExtension = (group: string, version: string, kind: string) => ({
  'x-kubernetes-group-version-kind': [gvk(group, version, kind)],
});
const kindName = (t: ServedType) => definitionName(t.group, t.version, t.kind);
const listName = (t: ServedType) => definitionName(t.group, t.version, `${t.kind}List`);

/**
 * A custom resource's definition as apiextensions-apiserver builds it (builder.go
 * buildKubeNative): its CRD schema with apiVersion, kind and metadata set. In v2 a schema open at
 * the root is published as a bare object, which is what kubectl's v2 validation copes with.
 */
function customKindSchema(t: ServedType, schema: Schema, version: OpenApiVersion): Schema {
  const extension = gvkExtension(t.group, t.version, t.kind);
  if (version === 'v2' && schema['x-kubernetes-preserve-unknown-fields'] === true)
    return { type: 'object', ...extension };
  const properties = isSchema(schema['properties']) ? schema['properties'] : {};
  return {
    ...schema,
    properties: { ...properties, metadata: objectMetadata, ...typeMeta },
    ...extension,
  };
}

function kindSchema(t: ServedType, version: OpenApiVersion): Schema {
  const builtin = t.group === '' ? coreKinds[t.kind] : undefined;
  if (builtin !== undefined)
    return { ...builtin.schema, ...gvkExtension(t.group, t.version, t.kind) };
  const schema = t.schema ??
    describedSchemas[`${t.group}/${t.version}/${t.kind}`] ?? {
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    };
  return customKindSchema(t, schema, version);
}

/** The list kind (builder.go buildListSchema; core lists carry kube's own descriptions). */
function listSchema(t: ServedType): Schema {
  const [description, items] = (t.group === '' ? coreKinds[t.kind]?.list : undefined) ?? [
    `${t.kind}List is a list of ${t.kind}`,
    `List of ${t.plural}. More info: ${conventions}`,
  ];
  return {
    ...object(description, {
      ...typeMeta,
      items: listOf(kindName(t), items),
      metadata: listMetadata,
    }),
    required: ['items'],
    ...gvkExtension(t.group, t.version, `${t.kind}List`),
  };
}

// ---------------------------------------------------------------------------------------------
// Per-version schema conversion.

/**
 * v2: apiextensions-apiserver's ToStructuralOpenAPIV2 (controller/openapi/v2/conversion.go): no
 * junctors, no nullable, open objects and arrays without items lose their type and structure;
 * and no defaults (the v2 handler prunes them).
 */
function toV2(schema: Schema): Schema {
  return mapSchema(schema, (s) => {
    let out = without(s, 'allOf', 'anyOf', 'oneOf', 'not', 'nullable', 'default');
    const preserve = out['x-kubernetes-preserve-unknown-fields'] === true;
    if (s['nullable'] === true) out = without(out, 'type', 'items', 'properties');
    if (preserve) out = without(out, 'items', 'properties');
    if (out['type'] === 'array' && out['items'] === undefined) out = without(out, 'type');
    if (preserve && out['type'] === 'object') out = without(out, 'type');
    const properties = isSchema(out['properties']) ? out['properties'] : {};
    const nullable = (name: string) =>
      isSchema(properties[name]) && properties[name]['nullable'] === true;
    if (Array.isArray(out['required'])) {
      const required = out['required'].filter((name: unknown) => !nullable(String(name)));
      const valuesNullable =
        isSchema(out['additionalProperties']) && out['additionalProperties']['nullable'] === true;
      out = without(out, 'required');
      if (required.length > 0 && !valuesNullable) out['required'] = required;
    }
    return out;
  });
}

/**
 * v3: refs under #/components/schemas/, and a $ref with siblings wrapped in allOf, as kube-openapi
 * builder3's WrapRefs does (kubectl explain follows allOf); x-kubernetes-int-or-string unfolded
 * to its anyOf, as the structural schema's Unfold does for CRDs.
 */
function toV3(schema: Schema): Schema {
  return mapSchema(schema, (s) => {
    let out = s;
    const target = out['$ref'];
    if (typeof target === 'string') {
      const v3 = { $ref: target.replace(v2Prefix, v3Prefix) };
      const rest = without(out, '$ref');
      out = Object.keys(rest).length === 0 ? v3 : { ...rest, allOf: [v3] };
    }
    if (
      out['x-kubernetes-int-or-string'] === true &&
      out['anyOf'] === undefined &&
      out['allOf'] === undefined
    ) {
      out = { ...out, anyOf: [{ type: 'integer' }, { type: 'string' }] };
    }
    return out;
  });
}

/** Every definition the served types need, in `version`'s form. */
function definitions(
  types: readonly ServedType[],
  version: OpenApiVersion,
): Record<string, Schema> {
  const all: Record<string, Schema> = { ...metaDefinitions, ...coreDefinitions };
  for (const t of types) {
    all[kindName(t)] = kindSchema(t, version);
    all[listName(t)] = listSchema(t);
  }
  const convert = version === 'v2' ? toV2 : toV3;
  return Object.fromEntries(Object.entries(all).map(([name, s]) => [name, convert(s)]));
}

// ---------------------------------------------------------------------------------------------
// Routes: the served operations, one per path and method, rendered into either version.

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type ParameterType = 'string' | 'integer' | 'boolean';

interface Parameter {
  name: string;
  in: 'path' | 'query';
  type: ParameterType;
  description: string;
}

interface Route {
  path: string;
  method: Method;
  /** x-kubernetes-action. */
  action: 'get' | 'list' | 'post' | 'put' | 'patch' | 'delete';
  operationId: string;
  tag: string;
  description: string;
  gvk: { group: string; kind: string; version: string };
  parameters: readonly Parameter[];
  body?: { definition: string; required: boolean; mediaTypes: readonly string[] };
  responses: ReadonlyArray<readonly [code: number, description: string, definition: string]>;
}

const query = (name: string, type: ParameterType, description: string): Parameter => ({
  name,
  in: 'query',
  type,
  description,
});

const pretty = query(
  'pretty',
  'string',
  "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
);
const fieldManager =
  'fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.';
const fieldValidation = query(
  'fieldValidation',
  'string',
  'fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.',
);
const resourceVersion = query(
  'resourceVersion',
  'string',
  'resourceVersion sets a constraint on what resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset',
);

/** The query parameters kube derives from each verb's options struct (endpoints AddObjectParams). */
const optionParameters: Record<Route['action'], readonly Parameter[]> = {
  get: [resourceVersion],
  list: [
    query(
      'allowWatchBookmarks',
      'boolean',
      'allowWatchBookmarks requests watch events with type "BOOKMARK". Servers that do not implement bookmarks may ignore this flag and bookmarks are sent at the server\'s discretion. Clients should not assume bookmarks are returned at any specific interval, nor may they assume the server will send any BOOKMARK event during a session. If this is not a watch, this field is ignored.',
    ),
    query(
      'continue',
      'string',
      'The continue option should be set when retrieving more results from the server. Since this value is server defined, clients may only use the continue value from a previous query result with identical query parameters (except for the value of continue) and the server may reject a continue value it does not recognize.\n\nThis field is not supported when watch is true. Clients may start a watch from the last resourceVersion value returned by the server and not miss any modifications.',
    ),
    query(
      'fieldSelector',
      'string',
      'A selector to restrict the list of returned objects by their fields. Defaults to everything.',
    ),
    query(
      'labelSelector',
      'string',
      'A selector to restrict the list of returned objects by their labels. Defaults to everything.',
    ),
    query(
      'limit',
      'integer',
      'limit is a maximum number of responses to return for a list call. If more items exist, the server will set the `continue` field on the list metadata to a value that can be used with the same initial query to retrieve the next set of results. Servers may choose not to support the limit argument and will return all of the available results. If limit is specified and the continue field is empty, clients may assume that no more results are available. This field is not supported if watch is true.',
    ),
    resourceVersion,
    query(
      'resourceVersionMatch',
      'string',
      'resourceVersionMatch determines how resourceVersion is applied to list calls. It is highly recommended that resourceVersionMatch be set for list calls where resourceVersion is set See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset',
    ),
    query(
      'sendInitialEvents',
      'boolean',
      '`sendInitialEvents=true` may be set together with `watch=true`. In that case, the watch stream will begin with synthetic events to produce the current state of objects in the collection. Once all such events have been sent, a synthetic "Bookmark" event  will be sent.',
    ),
    query(
      'timeoutSeconds',
      'integer',
      'Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.',
    ),
    query(
      'watch',
      'boolean',
      'Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.',
    ),
  ],
  post: [
    query('dryRun', 'string', dryRun),
    query('fieldManager', 'string', fieldManager),
    fieldValidation,
  ],
  put: [
    query('dryRun', 'string', dryRun),
    query('fieldManager', 'string', fieldManager),
    fieldValidation,
  ],
  patch: [
    query('dryRun', 'string', dryRun),
    query(
      'fieldManager',
      'string',
      `${fieldManager} This field is required for apply requests (application/apply-patch) but optional for non-apply patch types (JsonPatch, MergePatch, StrategicMergePatch).`,
    ),
    fieldValidation,
    query(
      'force',
      'boolean',
      'Force is going to "force" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.',
    ),
  ],
  delete: [
    query('dryRun', 'string', dryRun),
    query(
      'gracePeriodSeconds',
      'integer',
      'The duration in seconds before the object should be deleted. Value must be non-negative integer. The value zero indicates delete immediately. If this value is nil, the default grace period for the specified type will be used. Defaults to a per object value if not specified. zero means delete immediately.',
    ),
    query(
      'orphanDependents',
      'boolean',
      'Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7. Should the dependent objects be orphaned. If true/false, the "orphan" finalizer will be added to/removed from the object\'s finalizers list. Either this field or PropagationPolicy may be set, but not both.',
    ),
    query(
      'propagationPolicy',
      'string',
      "Whether and how garbage collection will be performed. Either this field or OrphanDependents may be set, but not both. The default policy is decided by the existing finalizer set in the metadata.finalizers and the resource-specific default policy. Acceptable values are: 'Orphan' - orphan the dependents; 'Background' - allow the garbage collector to delete the dependents in the background; 'Foreground' - a cascading policy that deletes all dependents in the foreground.",
    ),
  ],
};

/** kube's ToValidOperationID (apiserver endpoints/openapi). */
function operationIdPart(s: string, capitalizeFirst: boolean): string {
  let out = '';
  let capitalize = capitalizeFirst;
  for (const [i, c] of [...s].entries()) {
    if (/\p{L}|_/u.test(c) || (i !== 0 && /\d/.test(c))) {
      out += capitalize ? c.toUpperCase() : c;
      capitalize = false;
    } else {
      capitalize = true;
    }
  }
  return out;
}

const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
/** "a Node", "an Event" (endpoints GetArticleForNoun). */
const withArticle = (kind: string) => `${/^[aeiou]/i.test(kind) ? 'an' : 'a'} ${kind}`;

const json = ['application/json'];
// The patch types server.ts serves: strategic merge patch for the built-in kinds only, as kube
// (custom resources have no patch strategies); apply-patch (server-side apply) is not served.
const patchTypes = (builtIn: boolean) => [
  'application/json-patch+json',
  'application/merge-patch+json',
  ...(builtIn ? ['application/strategic-merge-patch+json'] : []),
];

/** A verb as kube-apiserver's installer publishes it; `sub` is a subresource ("" for none). */
interface Verb {
  method: Method;
  action: Route['action'];
  /** The operation id's verb. */
  operation: string;
  describe(kind: string, sub: string): string;
  responses(object: string, list: string): Route['responses'];
  body?(object: string, builtIn: boolean): NonNullable<Route['body']>;
}

const of = (sub: string) => (sub === '' ? '' : `${sub} of `);
const verbs = {
  list: {
    method: 'get',
    action: 'list',
    operation: 'list',
    describe: (kind) => `list or watch objects of kind ${kind}`,
    responses: (_, list) => [[200, 'OK', list]],
  },
  create: {
    method: 'post',
    action: 'post',
    operation: 'create',
    describe: (kind) => `create ${withArticle(kind)}`,
    responses: (object) => [
      [200, 'OK', object],
      [201, 'Created', object],
      [202, 'Accepted', object],
    ],
    body: (object) => ({ definition: object, required: true, mediaTypes: json }),
  },
  read: {
    method: 'get',
    action: 'get',
    operation: 'read',
    describe: (kind, sub) => `read ${of(sub)}the specified ${kind}`,
    responses: (object) => [[200, 'OK', object]],
  },
  replace: {
    method: 'put',
    action: 'put',
    operation: 'replace',
    describe: (kind, sub) => `replace ${of(sub)}the specified ${kind}`,
    responses: (object) => [
      [200, 'OK', object],
      [201, 'Created', object],
    ],
    body: (object) => ({ definition: object, required: true, mediaTypes: json }),
  },
  patch: {
    method: 'patch',
    action: 'patch',
    operation: 'patch',
    describe: (kind, sub) => `partially update ${of(sub)}the specified ${kind}`,
    responses: (object) => [
      [200, 'OK', object],
      [201, 'Created', object],
    ],
    body: (_object, builtIn) => ({
      definition: meta('Patch'),
      required: true,
      mediaTypes: patchTypes(builtIn),
    }),
  },
  delete: {
    method: 'delete',
    action: 'delete',
    operation: 'delete',
    describe: (kind) => `delete ${withArticle(kind)}`,
    responses: () => [
      [200, 'OK', meta('Status')],
      [202, 'Accepted', meta('Status')],
    ],
    body: () => ({ definition: meta('DeleteOptions'), required: false, mediaTypes: json }),
  },
} satisfies Record<string, Verb>;

/** The routes server.ts serves for a type, named as kube-apiserver's installer names them. */
function routesOf(t: ServedType): Route[] {
  const prefix = t.group === '' ? '/api/v1' : `/apis/${t.group}/${t.version}`;
  const group = t.group === '' ? 'core' : t.group.replace(/\.k8s\.io$/, '');
  const tag = `${operationIdPart(group, false)}_${operationIdPart(t.version, false)}`;
  const gv = `${operationIdPart(group, true)}${operationIdPart(t.version, true)}`;
  const collection = t.namespaced
    ? `${prefix}/namespaces/{namespace}/${t.plural}`
    : `${prefix}/${t.plural}`;
  const item = `${collection}/{name}`;
  const inPath = (name: string, description: string): Parameter => ({
    name,
    in: 'path',
    type: 'string',
    description,
  });
  const scope = t.namespaced
    ? [inPath('namespace', 'object name and auth scope, such as for teams and projects')]
    : [];
  const named = [...scope, inPath('name', `name of the ${t.kind}`)];
  interface Endpoint {
    path: string;
    verb: Verb;
    parameters: readonly Parameter[];
    subresource?: 'status';
    /** The cluster-wide list of a namespaced kind: kube's ...ForAllNamespaces operation. */
    allNamespaces?: boolean;
  }
  const at =
    (path: string, parameters: readonly Parameter[], subresource?: 'status') =>
    (verb: Verb): Endpoint =>
      subresource === undefined
        ? { path, verb, parameters }
        : { path, verb, parameters, subresource };
  const everywhere: Endpoint = {
    path: `${prefix}/${t.plural}`,
    verb: verbs.list,
    parameters: [],
    allNamespaces: true,
  };
  const endpoints: Endpoint[] = [
    ...(t.namespaced ? [everywhere] : []),
    ...[verbs.list, verbs.create].map(at(collection, scope)),
    ...[verbs.read, verbs.replace, verbs.patch, verbs.delete].map(at(item, named)),
    ...(t.status
      ? [verbs.read, verbs.replace, verbs.patch].map(at(`${item}/status`, named, 'status'))
      : []),
  ];
  const object = kindName(t);
  return endpoints.map(({ path, verb, parameters, subresource = '', allNamespaces }) => {
    const body = verb.body?.(object, t.schema === undefined && t.group === '');
    const scoped = t.namespaced && allNamespaces !== true ? 'Namespaced' : '';
    const suffix = allNamespaces === true ? 'ForAllNamespaces' : capitalized(subresource);
    return {
      path,
      method: verb.method,
      action: verb.action,
      operationId: `${verb.operation}${gv}${scoped}${t.kind}${suffix}`,
      tag,
      description: verb.describe(t.kind, subresource),
      gvk: gvk(t.group, t.version, t.kind),
      // Built-in kinds take no GetOptions on read; custom resources do (CRD builder.go).
      parameters: [
        ...parameters,
        pretty,
        ...(verb.action === 'get' && t.group === '' ? [] : optionParameters[verb.action]),
      ],
      ...(body === undefined ? {} : { body }),
      responses: verb.responses(object, listName(t)),
    };
  });
}

const parameterKey = (p: Parameter) => `${p.in}:${p.name}`;
/** kube-openapi's sortParameters order: by name, then by location. */
const byNameIn = (a: Schema, b: Schema) => {
  const [x, y] = [a, b].map((p) => `${String(p['name'])}\0${String(p['in'])}`);
  return x! < y! ? -1 : x! > y! ? 1 : 0;
};

function renderParameter(p: Parameter, version: OpenApiVersion): Schema {
  const required = p.in === 'path' ? { required: true } : {};
  return version === 'v3'
    ? {
        name: p.name,
        in: p.in,
        description: p.description,
        ...required,
        schema: { type: p.type, uniqueItems: true },
      }
    : {
        uniqueItems: true,
        type: p.type,
        description: p.description,
        name: p.name,
        in: p.in,
        ...required,
      };
}

function renderOperation(
  route: Route,
  common: ReadonlySet<string>,
  version: OpenApiVersion,
): Schema {
  const prefix = version === 'v3' ? v3Prefix : v2Prefix;
  const target = (definition: string) => ({ $ref: `${prefix}${definition}` });
  const parameters = route.parameters
    .filter((p) => !common.has(parameterKey(p)))
    .map((p) => renderParameter(p, version));
  const { body } = route;
  const responses = Object.fromEntries<Schema>([
    ...route.responses.map(([code, description, definition]): [string, Schema] => [
      String(code),
      version === 'v3'
        ? {
            description,
            content: Object.fromEntries(json.map((m) => [m, { schema: target(definition) }])),
          }
        : { description, schema: target(definition) },
    ]),
    ['401', { description: 'Unauthorized' }],
  ]);
  const extensions = {
    'x-kubernetes-action': route.action,
    'x-kubernetes-group-version-kind': route.gvk,
  };
  if (version === 'v3') {
    return {
      tags: [route.tag],
      description: route.description,
      operationId: route.operationId,
      ...(parameters.length > 0 ? { parameters: parameters.sort(byNameIn) } : {}),
      ...(body === undefined
        ? {}
        : {
            requestBody: {
              content: Object.fromEntries(
                body.mediaTypes.map((m) => [m, { schema: target(body.definition) }]),
              ),
              ...(body.required ? { required: true } : {}),
            },
          }),
      responses,
      ...extensions,
    };
  }
  const bodyParameter =
    body === undefined
      ? []
      : [{ name: 'body', in: 'body', required: body.required, schema: target(body.definition) }];
  return {
    description: route.description,
    consumes: body?.mediaTypes ?? ['*/*'],
    produces: json,
    schemes: ['https'],
    tags: [route.tag],
    operationId: route.operationId,
    ...(parameters.length + bodyParameter.length > 0
      ? { parameters: [...parameters, ...bodyParameter].sort(byNameIn) }
      : {}),
    responses,
    ...extensions,
  };
}

/**
 * Path items: parameters every operation of a path shares are listed once on the path, as
 * kube-openapi's builders do (name, namespace, pretty); the rest stay on their operations, which
 * is where kubectl looks for fieldValidation.
 */
function renderPaths(routes: readonly Route[], version: OpenApiVersion): Record<string, Schema> {
  const byPath = groupBy(routes, (r) => r.path);
  return Object.fromEntries(
    [...byPath].map(([path, group]) => {
      const common = new Set(
        group[0]!.parameters
          .map(parameterKey)
          .filter((key) => group.every((r) => r.parameters.some((p) => parameterKey(p) === key))),
      );
      const shared = group[0]!.parameters
        .filter((p) => common.has(parameterKey(p)))
        .map((p) => renderParameter(p, version))
        .sort(byNameIn);
      const item: Schema = Object.fromEntries(
        group.map((r) => [r.method, renderOperation(r, common, version)]),
      );
      return [path, { ...item, parameters: shared }];
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Documents.

/** Names of the definitions `value` refers to. */
function refsIn(value: unknown, found = new Set<string>()): Set<string> {
  if (Array.isArray(value)) value.forEach((v) => refsIn(v, found));
  else if (isSchema(value)) {
    for (const [key, v] of Object.entries(value)) {
      if (key === '$ref' && typeof v === 'string') found.add(v.slice(v.lastIndexOf('/') + 1));
      else refsIn(v, found);
    }
  }
  return found;
}

/** The definitions reachable from `roots`, sorted by name (kube emits Go maps, sorted). */
function reachable(roots: unknown, all: Record<string, Schema>): Record<string, Schema> {
  const names = new Set<string>();
  const visit = (name: string) => {
    if (names.has(name) || all[name] === undefined) return;
    names.add(name);
    refsIn(all[name]).forEach(visit);
  };
  refsIn(roots).forEach(visit);
  return Object.fromEntries([...names].sort().map((name) => [name, all[name]!]));
}

/** The path a group-version has under /openapi/v3 (client-go openapi3 gvToAPIPath). */
const groupVersionPath = (t: ServedType) =>
  t.group === '' ? `api/${t.version}` : `apis/${t.group}/${t.version}`;

/** The version /version reports (server.ts); kube puts its own in `info`. */
const info = { title: 'Kubernetes', version: 'v1.31.0-edgeai-dev' };
const bearer = {
  BearerToken: {
    type: 'apiKey',
    description: 'Bearer Token authentication',
    name: 'authorization',
    in: 'header',
  },
};

function v3Document(types: readonly ServedType[], all: Record<string, Schema>): Schema {
  const paths = renderPaths(types.flatMap(routesOf), 'v3');
  return {
    openapi: '3.0.0',
    info,
    paths,
    components: { schemas: reachable(paths, all), securitySchemes: bearer },
    security: [{ BearerToken: [] }],
  };
}

function v2Document(types: readonly ServedType[]): Schema {
  const paths = renderPaths(types.flatMap(routesOf), 'v2');
  return {
    swagger: '2.0',
    info,
    paths,
    definitions: reachable(paths, definitions(types, 'v2')),
    securityDefinitions: bearer,
    security: [{ BearerToken: [] }],
  };
}

/** kube-openapi handler3's ETag: the uppercase hex SHA-512 of the served JSON. */
const etag = (document: unknown) =>
  createHash('sha512').update(JSON.stringify(document)).digest('hex').toUpperCase();

interface Documents {
  v2: Schema;
  v3Root: Schema;
  v3: ReadonlyMap<string, Schema>;
}

function buildDocuments(types: readonly ServedType[]): Documents {
  const all = definitions(types, 'v3');
  const v3 = new Map(
    [...groupBy(types, groupVersionPath)].map(([path, group]) => [path, v3Document(group, all)]),
  );
  // The hash lets clients cache a group-version's document until it changes.
  const v3Root = {
    paths: Object.fromEntries(
      [...v3].map(([path, document]) => [
        path,
        { serverRelativeURL: `/openapi/v3/${path}?hash=${etag(document)}` },
      ]),
    ),
  };
  return { v2: v2Document(types), v3Root, v3 };
}

/** Built once per types array: the documents and their hashes never change while serving. */
const built = new WeakMap<readonly ServedType[], Documents>();

/**
 * The document at `pathname` (`/openapi/v2`, `/openapi/v3`, `/openapi/v3/<api|apis/g>/<v>`), or
 * undefined when there is none there.
 */
function openApiDocument(pathname: string, types: readonly ServedType[]): unknown {
  let documents = built.get(types);
  if (documents === undefined) {
    documents = buildDocuments(types);
    built.set(types, documents);
  }
  if (pathname === '/openapi/v2') return documents.v2;
  if (pathname === '/openapi/v3') return documents.v3Root;
  const v3 = '/openapi/v3/';
  return pathname.startsWith(v3) ? documents.v3.get(pathname.slice(v3.length)) : undefined;
}

export { openApiDocument };
