/**
 * The OpenAPI documents kubectl reads before it creates, applies or explains: their structure
 * (what cli-runtime's query-param verifier and kubectl explain look up), and the real kubectl
 * against a server in this process when kubectl is on PATH.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { servedTypes } from '../../../local/apiserver/index.js';
import type { ServedType } from '../../../local/apiserver/index.js';
import { openApiDocument } from '../../../local/apiserver/openapi.js';
import { kubectlMissing, validatesOnServer } from '../../support/kubectl.js';
import { httpsRequest, startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';

type Json = Record<string, unknown>;
interface Operation {
  parameters?: Array<{ name?: string; in?: string; $ref?: string }>;
  'x-kubernetes-group-version-kind'?: Json;
}
interface Document {
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas: Record<string, Json> };
  definitions?: Record<string, Json>;
}

const run = promisify(execFile);
const root = join(import.meta.dirname, '../../..');
const gvPath = (t: ServedType) =>
  t.group === '' ? `api/${t.version}` : `apis/${t.group}/${t.version}`;
const gvk = (t: ServedType) => ({ group: t.group, kind: t.kind, version: t.version });

function document(path: string): Document {
  const found = openApiDocument(path, servedTypes);
  if (found === undefined) throw new Error(`no document at ${path}`);
  return found as Document;
}

/** The PATCH operations of a document that are for `t`, as the verifier selects them. */
function patchesOf(doc: Document, t: ServedType): Operation[] {
  return Object.values(doc.paths)
    .map((item) => item['patch'] as Operation | undefined)
    .filter((op): op is Operation => op !== undefined)
    .filter(
      (op) => JSON.stringify(op['x-kubernetes-group-version-kind']) === JSON.stringify(gvk(t)),
    );
}

function refs(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refs(v, found));
  else if (typeof value === 'object' && value !== null) {
    for (const [key, v] of Object.entries(value)) {
      if (key === '$ref' && typeof v === 'string') found.push(v);
      else refs(v, found);
    }
  }
  return found;
}

function resolves(doc: Document, ref: string): boolean {
  let at: unknown = doc;
  for (const part of ref.replace(/^#\//, '').split('/')) {
    at = typeof at === 'object' && at !== null ? (at as Json)[part] : undefined;
  }
  return typeof at === 'object' && at !== null;
}

const v3Documents = () =>
  [...new Set(servedTypes.map(gvPath))].map((p) => document(`/openapi/v3/${p}`));

describe('OpenAPI documents', () => {
  it('list every served group-version in the v3 root, with a content hash', () => {
    const listed = (
      openApiDocument('/openapi/v3', servedTypes) as {
        paths: Record<string, { serverRelativeURL: string }>;
      }
    ).paths;
    expect(Object.keys(listed).sort()).toEqual([...new Set(servedTypes.map(gvPath))].sort());
    for (const [path, { serverRelativeURL }] of Object.entries(listed)) {
      const hash = createHash('sha512')
        .update(JSON.stringify(document(`/openapi/v3/${path}`)))
        .digest('hex')
        .toUpperCase();
      expect(serverRelativeURL).toBe(`/openapi/v3/${path}?hash=${hash}`);
    }
  });

  it('give every kind PATCH operations carrying its GVK and fieldValidation, in v3 and v2', () => {
    const v2 = document('/openapi/v2');
    for (const t of servedTypes) {
      for (const doc of [document(`/openapi/v3/${gvPath(t)}`), v2]) {
        const patches = patchesOf(doc, t);
        expect(patches.length, `${t.kind}: main resource${t.status ? ' and /status' : ''}`).toBe(
          t.status ? 2 : 1,
        );
        for (const op of patches) {
          // Inline: cli-runtime resolves only `#/parameters/` refs, which v3 has no place for.
          expect(op.parameters).toContainEqual(
            expect.objectContaining({ name: 'fieldValidation', in: 'query' }),
          );
        }
      }
    }
  });

  it('describe every kind under the name kube gives it, with its GVK', () => {
    const named = (t: ServedType) =>
      t.group === ''
        ? `io.k8s.api.core.v1.${t.kind}`
        : `${t.group.split('.').reverse().join('.')}.${t.version}.${t.kind}`;
    expect(servedTypes.map(named)).toContain('io.edgeai.v1alpha1.JointInferenceService');
    for (const t of servedTypes) {
      const schemas = document(`/openapi/v3/${gvPath(t)}`).components!.schemas;
      const schema = schemas[named(t)]!;
      expect(schema['x-kubernetes-group-version-kind']).toEqual([gvk(t)]);
      expect(Object.keys(schema['properties'] as Json)).toEqual(
        expect.arrayContaining(['apiVersion', 'kind', 'metadata']),
      );
      expect(schemas[`${named(t)}List`]!['x-kubernetes-group-version-kind']).toEqual([
        { ...gvk(t), kind: `${t.kind}List` },
      ]);
      expect(document('/openapi/v2').definitions![named(t)]).toBeDefined();
    }
  });

  it('resolve every $ref within its own document', () => {
    for (const doc of [...v3Documents(), document('/openapi/v2')]) {
      const all = refs(doc);
      expect(all.length).toBeGreaterThan(0);
      expect(all.filter((r) => !resolves(doc, r))).toEqual([]);
    }
    expect(refs(document('/openapi/v2')).every((r) => r.startsWith('#/definitions/'))).toBe(true);
    for (const doc of v3Documents())
      expect(refs(doc).every((r) => r.startsWith('#/components/schemas/'))).toBe(true);
  });

  it("carry the CRD's schema for the JointInferenceService spec and status", () => {
    const crd = parse(
      readFileSync(join(root, 'knative/crds/jointinferenceservices.yaml'), 'utf8'),
    ) as { spec: { versions: Array<{ schema: { openAPIV3Schema: Json } }> } };
    const properties = crd.spec.versions[0]!.schema.openAPIV3Schema['properties'] as Json;
    const name = 'io.edgeai.v1alpha1.JointInferenceService';
    const v3 = document('/openapi/v3/apis/edgeai.io/v1alpha1').components!.schemas[name]!;
    expect((v3['properties'] as Json)['spec']).toEqual(properties['spec']);
    expect((v3['properties'] as Json)['status']).toEqual(properties['status']);
    expect(v3['required']).toEqual(['spec']);
    // Nothing in this CRD is outside OpenAPI v2 (no nullable, junctors, defaults): unchanged.
    const v2 = document('/openapi/v2').definitions![name]!;
    expect((v2['properties'] as Json)['spec']).toEqual(properties['spec']);
  });

  it('answer nothing outside the documents, and build them once', () => {
    for (const path of [
      '/openapi/v1',
      '/openapi/v3/',
      '/openapi/v3/apis/nope.io/v1',
      '/openapi/v3/api/v2',
    ])
      expect(openApiDocument(path, servedTypes), path).toBeUndefined();
    expect(openApiDocument('/openapi/v2', servedTypes)).toBe(
      openApiDocument('/openapi/v2', servedTypes),
    );
  });
});

const withKubectl = kubectlMissing === undefined ? it : it.skip;
const skipped = kubectlMissing === undefined ? '' : ` (skipped: ${kubectlMissing})`;
const withServerSide = validatesOnServer ? it : it.skip;
const serverSkipped = validatesOnServer
  ? ''
  : ` (skipped: ${kubectlMissing ?? 'this kubectl is older than 1.27 and validates on the client'})`;

describe('OpenAPI documents served to clients', () => {
  let api: TestApiServer;
  let env: NodeJS.ProcessEnv;
  let cacheDir: string;

  beforeAll(async () => {
    api = await startApiServer();
    env = { ...process.env, KUBECONFIG: api.kubeconfigFile };
    cacheDir = mkdtempSync(join(tmpdir(), 'edgeai-kubectl-cache-'));
  });
  afterAll(() => api.close());

  it('serves the root and the group-version at the hashed URL', async () => {
    const config = JSON.parse(readFileSync(api.kubeconfigFile, 'utf8')) as {
      users: Array<{ user: { token: string } }>;
    };
    const headers = { authorization: `Bearer ${config.users[0]!.user.token}` };
    const rootDoc = await httpsRequest(`${api.url}/openapi/v3`, api.ca, { headers });
    expect(rootDoc.status).toBe(200);
    const url = (
      JSON.parse(rootDoc.body) as { paths: Record<string, { serverRelativeURL: string }> }
    ).paths['apis/edgeai.io/v1alpha1']!.serverRelativeURL;
    const gv = await httpsRequest(`${api.url}${url}`, api.ca, { headers });
    expect(gv.status).toBe(200);
    const hash = createHash('sha512').update(gv.body).digest('hex').toUpperCase();
    expect(url.endsWith(`?hash=${hash}`)).toBe(true);
  });

  withKubectl(
    `lets kubectl explain jis.spec.edgeWorker from the CRD schema${skipped}`,
    async () => {
      const { stdout } = await run(
        'kubectl',
        ['explain', 'jis.spec.edgeWorker', '--cache-dir', cacheDir],
        { env },
      );
      // kubectl 1.27+ prints explain from OpenAPI v3 (GROUP, FIELD), older ones from v2.
      expect(stdout).toMatch(/KIND:\s+JointInferenceService/);
      expect(stdout).toMatch(/(FIELD|RESOURCE): edgeWorker <Object>/);
      expect(stdout).toMatch(/hardExampleAlgorithm\t<Object> -required-/);
      expect(stdout).toMatch(/nodeName\t<string>\n\s+Pin the worker to this node\./);
      expect(stdout).toMatch(/nodeSelector\t<map\[string\]string>\n\s+Or select nodes by label\./);
    },
  );

  withServerSide(`lets kubectl create leave validation to the server${serverSkipped}`, async () => {
    const sample = join(root, 'knative/samples/helmet-detection-demo.yaml');
    const { stdout, stderr } = await run(
      'kubectl',
      ['create', '-f', sample, '-v=6', '--cache-dir', cacheDir],
      { env },
    );
    expect(stdout).toContain('jointinferenceservice.edgeai.io/helmet-detection-demo created');
    expect(stderr).toMatch(/GET \S+\/openapi\/v3\/apis\/edgeai\.io\/v1alpha1\?hash=[0-9A-F]{128}/);
    expect(stderr).toMatch(/POST \S+\/jointinferenceservices\?\S*fieldValidation=Strict\S* 201/);
    expect(stderr).not.toContain('/openapi/v2');
  });
});
