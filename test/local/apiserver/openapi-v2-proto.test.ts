/**
 * `/openapi/v2` as gnostic protobuf, the form kubectl before 1.27 reads: decoded with the same
 * descriptor, it says what the JSON document says (every definition, read back into JSON), carries
 * what kubectl 1.20 looks up (GVK extensions, the PATCH operation's dryRun parameter), and is what
 * the server sends for the protobuf Accept header while JSON stays the answer to JSON.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:https';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { servedTypes } from '../../../local/apiserver/index.js';
import { openApiDocument } from '../../../local/apiserver/openapi.js';
import {
  encodeOpenApiV2,
  openApiV2DocumentType,
  protobufContentType,
} from '../../../local/apiserver/openapi-v2-proto.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { kubectlMissing } from '../../support/kubectl.js';

type Json = Record<string, unknown>;

// The decoded message's shape (protobufjs toObject: only fields present, int64 as numbers).
interface NamedAny {
  name: string;
  value: { yaml: string };
}
interface Named<T> {
  name: string;
  value: T;
}
interface Schema {
  _ref?: string;
  type?: { value: string[] };
  items?: { schema: Schema[] };
  additionalProperties?: { schema?: Schema; boolean?: boolean };
  properties?: { additionalProperties?: Array<Named<Schema>> };
  enum?: Array<{ yaml: string }>;
  vendorExtension?: NamedAny[];
  [scalar: string]: unknown;
}
interface Parameter {
  parameter?: {
    bodyParameter?: { name: string };
    nonBodyParameter?: {
      queryParameterSubSchema?: { name: string };
      pathParameterSubSchema?: { name: string };
    };
  };
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  vendorExtension?: NamedAny[];
}
interface Document {
  swagger: string;
  info: Json;
  paths: { path: Array<Named<Record<string, Operation | undefined>>> };
  definitions: { additionalProperties: Array<Named<Schema>> };
}

interface JsonDocument {
  info: Json;
  paths: Record<string, Json>;
  definitions: Record<string, Json>;
}

const PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';
const json = () => openApiDocument('/openapi/v2', servedTypes) as JsonDocument;

function decode(bytes: Uint8Array): Document {
  const type = openApiV2DocumentType;
  const decoded: unknown = type.toObject(type.decode(bytes), { longs: Number });
  return decoded as Document;
}

/** Vendor extensions back as JSON keys; their YAML is JSON, so parsing gives the value back. */
const extensions = (named: NamedAny[] = []): Json =>
  Object.fromEntries(named.map(({ name, value }) => [name, parse(value.yaml) as unknown]));

/** A decoded Schema back in Swagger JSON form, to compare with the document served as JSON. */
function schemaJson(s: Schema): Json {
  const {
    _ref,
    type,
    items,
    additionalProperties: extra,
    properties,
    vendorExtension,
    ...rest
  } = s;
  const out: Json = { ...rest, ...extensions(vendorExtension) };
  if (_ref !== undefined) out['$ref'] = _ref;
  if (type !== undefined) out['type'] = type.value.length === 1 ? type.value[0] : type.value;
  if (items !== undefined) out['items'] = schemaJson(items.schema[0]!);
  if (extra !== undefined) {
    out['additionalProperties'] = extra.schema ? schemaJson(extra.schema) : extra.boolean;
  }
  if (properties !== undefined) {
    const entries = properties.additionalProperties ?? [];
    out['properties'] = Object.fromEntries(entries.map((p) => [p.name, schemaJson(p.value)]));
  }
  if (s.enum !== undefined) out['enum'] = s.enum.map((v) => parse(v.yaml) as unknown);
  return out;
}

const jis = 'io.edgeai.v1alpha1.JointInferenceService';

describe('OpenAPI v2 as protobuf', () => {
  const decoded = decode(encodeOpenApiV2(json()));

  it('lists every definition of the JSON document, in its order, and reads each back equal', () => {
    const definitions = decoded.definitions.additionalProperties;
    expect(definitions.map((d) => d.name)).toEqual(Object.keys(json().definitions));
    expect(Object.fromEntries(definitions.map((d) => [d.name, schemaJson(d.value)]))).toEqual(
      json().definitions,
    );
    expect(decoded.swagger).toBe('2.0');
    expect(decoded.info).toEqual(json().info);
  });

  it('carries the GVK extension and the JointInferenceService spec kubectl validates against', () => {
    const schema = decoded.definitions.additionalProperties.find((d) => d.name === jis)!.value;
    expect(extensions(schema.vendorExtension)['x-kubernetes-group-version-kind']).toEqual([
      { group: 'edgeai.io', kind: 'JointInferenceService', version: 'v1alpha1' },
    ]);
    const spec = schema.properties!.additionalProperties!.find((p) => p.name === 'spec')!.value;
    const specJson = (json().definitions[jis]!['properties'] as Record<string, Json>)['spec']!;
    expect(spec.properties!.additionalProperties!.map((p) => p.name)).toEqual(
      Object.keys(specJson['properties'] as Json),
    );
    expect(schemaJson(spec)).toEqual(specJson);
  });

  it("gives each kind's PATCH operation its GVK and a dryRun query parameter (kubectl 1.20 --dry-run=server)", () => {
    expect(decoded.paths.path.map((p) => p.name)).toEqual(Object.keys(json().paths));
    const item = decoded.paths.path.find(
      (p) =>
        p.name === '/apis/edgeai.io/v1alpha1/namespaces/{namespace}/jointinferenceservices/{name}',
    )!.value;
    const patch = item['patch']!;
    expect(extensions(patch.vendorExtension)['x-kubernetes-group-version-kind']).toEqual({
      group: 'edgeai.io',
      kind: 'JointInferenceService',
      version: 'v1alpha1',
    });
    const queries = (patch.parameters ?? []).map(
      (p) => p.parameter?.nonBodyParameter?.queryParameterSubSchema?.name,
    );
    expect(queries).toContain('dryRun');
    const bodies = (patch.parameters ?? []).map((p) => p.parameter?.bodyParameter?.name);
    expect(bodies).toContain('body');
  });

  it('is encoded once per document, and refuses a keyword it has no field for', () => {
    expect(encodeOpenApiV2(json())).toBe(encodeOpenApiV2(json()));
    const unknown = {
      swagger: '2.0',
      definitions: { X: { type: 'object', patternProperties: {} } },
    };
    expect(() => encodeOpenApiV2(unknown)).toThrow('Schema has no field for "patternProperties"');
  });
});

/** A GET whose body stays bytes (the support helper decodes bodies as UTF-8). */
function get(
  api: TestApiServer,
  path: string,
  accept: string,
): Promise<{ status: number; contentType: string; body: Buffer }> {
  const config = JSON.parse(readFileSync(api.kubeconfigFile, 'utf8')) as {
    users: Array<{ user: { token: string } }>;
  };
  const headers = { authorization: `Bearer ${config.users[0]!.user.token}`, accept };
  return new Promise((resolve, reject) => {
    const req = request(`${api.url}${path}`, { ca: api.ca, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          contentType: res.headers['content-type'] ?? '',
          body: Buffer.concat(chunks),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const run = promisify(execFile);
const withKubectl = kubectlMissing === undefined ? it : it.skip;

describe('/openapi/v2 served by Accept', () => {
  let api: TestApiServer;
  beforeAll(async () => {
    api = await startApiServer();
  });
  afterAll(() => api.close());

  it('sends the protobuf for the protobuf media type, labelled so Go can parse the label', async () => {
    for (const accept of [
      PROTOBUF,
      `${protobufContentType}, application/json`,
      `*/*, ${PROTOBUF}`,
    ]) {
      const res = await get(api, '/openapi/v2', accept);
      expect(res.status, accept).toBe(200);
      expect(res.contentType, accept).toBe(protobufContentType);
      expect(decode(res.body).definitions.additionalProperties.map((d) => d.name)).toEqual(
        Object.keys(json().definitions),
      );
    }
  });

  it('still sends JSON for a JSON Accept, or when JSON comes first or weighs more', async () => {
    for (const accept of [
      'application/json',
      '',
      '*/*',
      `application/json, ${PROTOBUF}`,
      `${PROTOBUF};q=0.5, application/json`,
    ]) {
      const res = await get(api, '/openapi/v2', accept);
      expect(res.status, accept).toBe(200);
      expect(res.contentType, accept).toBe('application/json');
      expect(JSON.parse(res.body.toString('utf8')), accept).toEqual(json());
    }
  });

  // kubectl < 1.27 explains from the v2 protobuf; newer ones do when asked for the v2 output.
  withKubectl(
    `lets kubectl explain from the protobuf document${kubectlMissing === undefined ? '' : ` (skipped: ${kubectlMissing})`}`,
    async () => {
      const cacheDir = mkdtempSync(join(tmpdir(), 'edgeai-kubectl-cache-'));
      const help = spawnSync('kubectl', ['explain', '--help'], { encoding: 'utf8' }).stdout;
      const v2Output = help.includes('plaintext-openapiv2') ? ['--output=plaintext-openapiv2'] : [];
      const { stdout, stderr } = await run(
        'kubectl',
        ['explain', 'jis.spec.edgeWorker', ...v2Output, '-v=6', '--cache-dir', cacheDir],
        { env: { ...process.env, KUBECONFIG: api.kubeconfigFile } },
      );
      expect(stderr).toMatch(/GET \S+\/openapi\/v2\S* 200/);
      expect(stdout).toMatch(/KIND:\s+JointInferenceService/);
      expect(stdout).toMatch(/RESOURCE:\s+edgeWorker <Object>/);
      expect(stdout).toMatch(/hardExampleAlgorithm\t<Object> -required-/);
    },
  );
});
