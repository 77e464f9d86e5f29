/**
 * The real kubectl against the development API server, as a person would use it with the
 * kubeconfig the server writes: TLS verified against the server's CA, the bearer token sent, the
 * seed's sample created with kubectl's default validation, printer columns, client-side apply,
 * merge patch, labels, describe, events, secrets, server-side schema validation, explain, watch
 * and delete; and the federated learning sample (its Datasets, Model and job, their columns). Skipped (one line) where kubectl is not installed; `make test` installs it when it
 * can (scripts/ensure-kubectl.sh).
 */
import { execFile, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer } from '../support/apiserver.js';
import { kubectlMissing } from '../support/kubectl.js';
import type { TestApiServer } from '../support/apiserver.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const sample = 'knative/samples/helmet-detection-demo.yaml';
const exec = promisify(execFile);

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

describe.skipIf(kubectlMissing !== undefined)(
  `kubectl against the development API server${kubectlMissing === undefined ? '' : ` (skipped: ${kubectlMissing})`}`,
  () => {
    let api: TestApiServer;
    const kubectl = async (...args: string[]): Promise<Result> => {
      try {
        const { stdout, stderr } = await exec('kubectl', args, {
          cwd: root,
          env: { ...process.env, KUBECONFIG: api.kubeconfigFile },
        });
        return { code: 0, stdout, stderr };
      } catch (err) {
        const failed = err as { code?: number; stdout?: string; stderr?: string };
        return { code: failed.code ?? 1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
      }
    };
    const ok = async (...args: string[]): Promise<string> => {
      const result = await kubectl(...args);
      expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
      return result.stdout;
    };

    beforeAll(async () => {
      api = await startApiServer();
      await api.kube.create('node', undefined, {
        metadata: { name: 'edge0', labels: { 'node-role.kubernetes.io/edge': '' } },
        status: {
          conditions: [{ type: 'Ready', status: 'True' }],
          nodeInfo: { kubeletVersion: 'v1.31.0' },
        },
      });
    });
    afterAll(() => api.close());

    it('gets nodes over TLS with the token, with the node columns', async () => {
      const out = await ok('get', 'nodes');
      expect(out).toMatch(/^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION\n/);
      expect(out).toMatch(/edge0\s+Ready\s+edge\s+\S+\s+v1\.31\.0/);
      const resources = await ok('api-resources', '--namespaced=false', '-o', 'name');
      expect(resources.split('\n')).toContain('nodes');
      expect(resources).not.toContain('jointinferenceservices');
    });

    it('creates the seed sample with default validation and shows the printer columns', async () => {
      expect(await ok('create', '-f', sample)).toContain(
        'jointinferenceservice.edgeai.io/helmet-detection-demo created',
      );
      const table = await ok('get', 'jis');
      expect(table).toMatch(/^NAME\s+READY\s+EDGE\s+CLOUD\s+UPLOADED\s+DRIFT\s+ESTLOSS\s+AGE\n/);
      expect(table).toMatch(/helmet-detection-demo\s/);
    });

    it('applies the sample again, merge-patches (generation bumps), labels and selects', async () => {
      const applied = await kubectl('apply', '-f', sample);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stdout).toMatch(/helmet-detection-demo (configured|unchanged)/);
      const before = Number(
        await ok('get', 'jis', 'helmet-detection-demo', '-o', 'jsonpath={.metadata.generation}'),
      );
      await ok(
        'patch',
        'jis',
        'helmet-detection-demo',
        '--type',
        'merge',
        '-p',
        '{"spec":{"edgeWorker":{"hardExampleAlgorithm":{"parameters":{"threshold":0.4}}}}}',
      );
      const after = Number(
        await ok('get', 'jis', 'helmet-detection-demo', '-o', 'jsonpath={.metadata.generation}'),
      );
      expect(after).toBe(before + 1);
      await ok('label', 'jis', 'helmet-detection-demo', 'team=vision');
      expect((await ok('get', 'jis', '-l', 'team=vision', '-o', 'name')).trim()).toBe(
        'jointinferenceservice.edgeai.io/helmet-detection-demo',
      );
      expect((await ok('get', 'jis', '-l', 'team!=vision', '-o', 'name')).trim()).toBe('');
    });

    it('describes the resource with its events, and lists events', async () => {
      const jis = await api.kube.get({
        kind: 'jointInferenceService',
        namespace: 'default',
        name: 'helmet-detection-demo',
      });
      const now = new Date().toISOString();
      await api.kube.create('event', 'default', {
        metadata: { name: 'helmet-detection-demo.1', namespace: 'default' },
        involvedObject: {
          apiVersion: 'edgeai.io/v1alpha1',
          kind: 'JointInferenceService',
          name: 'helmet-detection-demo',
          namespace: 'default',
          uid: jis.metadata.uid,
        },
        reason: 'WorkersCreated',
        message: 'edge and cloud workers exist',
        type: 'Normal',
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: 'reconcile-tick' },
      });
      const described = await ok('describe', 'jis', 'helmet-detection-demo');
      expect(described).toMatch(/^Name:\s+helmet-detection-demo$/m);
      expect(described).toMatch(/Hard Example Algorithm:/);
      expect(described).toMatch(/Events:[\s\S]*WorkersCreated[\s\S]*edge and cloud workers exist/);
      const events = await ok('get', 'events');
      expect(events).toMatch(
        /Normal\s+WorkersCreated\s+jointinferenceservice\/helmet-detection-demo\s+edge and cloud workers exist/,
      );
    });

    it('creates a secret from literals and reads its data', async () => {
      await ok(
        'create',
        'secret',
        'generic',
        'creds',
        '--from-literal=user=edge',
        '--from-literal=pass=s3cret',
      );
      const data = await ok('get', 'secret', 'creds', '-o', 'jsonpath={.data.pass}');
      expect(Buffer.from(data, 'base64').toString()).toBe('s3cret');
      expect(await ok('get', 'secret', 'creds')).toMatch(/creds\s+Opaque\s+2\s/);
    });

    it('takes strategic merge patches on built-in kinds: apply of a Secret twice, label a node', async () => {
      const file = join(api.kubeconfigFile, '..', 'secret.yaml');
      const secret = (value: string) =>
        writeFileSync(
          file,
          `apiVersion: v1\nkind: Secret\nmetadata: {name: applied}\nstringData: {key: ${value}}\n`,
        );
      secret('one');
      expect(await ok('apply', '-f', file)).toContain('secret/applied created');
      secret('two');
      expect(await ok('apply', '-f', file)).toContain('secret/applied configured');
      const data = await ok('get', 'secret', 'applied', '-o', 'jsonpath={.data.key}');
      expect(Buffer.from(data, 'base64').toString()).toBe('two');
      await ok('label', 'node', 'edge0', 'zone=a');
      expect(await ok('get', 'nodes', '-l', 'zone=a', '-o', 'name')).toBe('node/edge0\n');
      expect(await ok('get', 'nodes', '-o', 'wide')).toMatch(/INTERNAL-IP\s+EXTERNAL-IP/);
    });

    it('runs --dry-run=server through validation without storing anything', async () => {
      const file = join(api.kubeconfigFile, '..', 'dry.yaml');
      writeFileSync(
        file,
        'apiVersion: edgeai.io/v1alpha1\nkind: Model\nmetadata: {name: dry}\nspec: {url: "file:///m.onnx", format: onnx}\n',
      );
      expect(await ok('apply', '--dry-run=server', '-f', file)).toContain(
        'created (server dry run)',
      );
      expect((await kubectl('get', 'model', 'dry')).code).not.toBe(0);
      await ok('apply', '-f', file);
      expect(await ok('delete', '--dry-run=server', 'model', 'dry')).toContain('(server dry run)');
      expect(await ok('get', 'model', 'dry', '-o', 'name')).toBe('model.edgeai.io/dry\n');
    });

    it('refuses an invalid JointInferenceService with 422 naming the field', async () => {
      const file = join(api.kubeconfigFile, '..', 'bad.yaml');
      writeFileSync(
        file,
        [
          'apiVersion: edgeai.io/v1alpha1',
          'kind: JointInferenceService',
          'metadata: {name: bad}',
          'spec:',
          '  edgeWorker:',
          '    model: {name: small-model}',
          '    hardExampleAlgorithm: {name: IBT, parameters: {threshold: high}}',
          '  cloudWorker:',
          '    model: {name: big-model}',
        ].join('\n'),
      );
      // Default validation: kubectl 1.27+ leaves it to the server (the 422), older ones refuse on
      // the client from OpenAPI v2; either way the field is named and nothing is stored.
      const refused = await kubectl('create', '-f', file);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain('spec.edgeWorker.hardExampleAlgorithm.parameters.threshold');
      // The server's own answer, whatever the client checks first.
      const unchecked = await kubectl('create', '--validate=false', '-f', file);
      expect(unchecked.code).not.toBe(0);
      expect(unchecked.stderr).toContain(
        'The JointInferenceService "bad" is invalid: spec.edgeWorker.hardExampleAlgorithm.parameters.threshold: Invalid value: "string"',
      );
      expect((await kubectl('get', 'jis', 'bad')).code).not.toBe(0);
    });

    it('explains jis.spec from the CRD schema', async () => {
      const out = await ok('explain', 'jis.spec.edgeWorker');
      expect(out).toMatch(/KIND:\s+JointInferenceService/);
      expect(out).toContain('hardExampleAlgorithm');
    });

    it('watches a change and deletes the resource', async () => {
      const watcher = spawn(
        'kubectl',
        ['get', 'jis', 'helmet-detection-demo', '-w', '--output-watch-events'],
        {
          cwd: root,
          env: { ...process.env, KUBECONFIG: api.kubeconfigFile },
        },
      );
      let seen = '';
      watcher.stdout.on('data', (chunk: Buffer) => (seen += chunk.toString('utf8')));
      const until = async (pattern: RegExp) => {
        const deadline = Date.now() + 15_000;
        while (!pattern.test(seen) && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 50));
        expect(seen).toMatch(pattern);
      };
      try {
        await until(/ADDED\s+helmet-detection-demo/);
        await ok('label', 'jis', 'helmet-detection-demo', 'stage=watched');
        await until(/MODIFIED\s+helmet-detection-demo/);
        expect(await ok('delete', 'jis', 'helmet-detection-demo')).toContain('deleted');
        await until(/DELETED\s+helmet-detection-demo/);
      } finally {
        watcher.kill();
      }
      const gone = await kubectl('get', 'jis', 'helmet-detection-demo');
      expect(gone.code).not.toBe(0);
      expect(gone.stderr).toContain('NotFound');
    });

    describe('federated learning', () => {
      const flSample = 'knative/samples/federated-digits.yaml';

      it('applies the federated-digits sample: Datasets, the Model and the job', async () => {
        const out = await ok('apply', '-f', flSample);
        for (const created of [
          'dataset.edgeai.io/digits-edge0 created',
          'dataset.edgeai.io/digits-edge1 created',
          'dataset.edgeai.io/digits-edge2 created',
          'dataset.edgeai.io/digits-eval created',
          'model.edgeai.io/digits-fl created',
          'federatedlearningjob.edgeai.io/digits created',
        ])
          expect(out).toContain(created);
        expect(await ok('apply', '-f', flSample)).toContain(
          'federatedlearningjob.edgeai.io/digits unchanged',
        );
      });

      it("stores the job as applied: the defaults are the controller's", async () => {
        const fields = await ok(
          'get',
          'fl',
          'digits',
          '-o',
          'jsonpath={.metadata.generation} {.spec.roundPolicy.minParticipants} {.spec.trainingWorkers[2].backoffLimit}|{.spec.trainingWorkers[0].restartPolicy}{.spec.cleanPolicy}{.spec.training}',
        );
        expect(fields).toBe('1 2 3|');
      });

      it('lists jobs with their phase, round, accuracy and workers, and shows a status patch', async () => {
        expect(await ok('get', 'fl')).toMatch(
          /^NAME\s+PHASE\s+ROUND\s+ACCURACY\s+WORKERS\s+AGE\ndigits\s+\d+s\n$/,
        );
        await api.kube.patchStatus(
          { kind: 'federatedLearningJob', namespace: 'default', name: 'digits' },
          {
            status: {
              phase: 'Running',
              round: 3,
              accuracy: 0.912,
              loss: 0.31,
              activeWorkers: 4,
              conditions: [{ type: 'Running', status: 'True', reason: 'RoundOpen' }],
            },
          },
        );
        expect(await ok('get', 'federatedlearningjobs')).toMatch(
          /^NAME\s+PHASE\s+ROUND\s+ACCURACY\s+WORKERS\s+AGE\ndigits\s+Running\s+3\s+0\.912\s+4\s+\d+s\n$/,
        );
      });

      it('refuses a status the schema does not allow, naming the field', async () => {
        await expect(
          api.kube.patchStatus(
            { kind: 'federatedLearningJob', namespace: 'default', name: 'digits' },
            { status: { conditions: [{ type: 'Round3', status: 'True' }] } },
          ),
        ).rejects.toThrow(/status\.conditions\[0\]\.type/);
      });

      it('lists datasets with their node and format', async () => {
        const table = await ok('get', 'datasets');
        expect(table).toMatch(/^NAME\s+NODE\s+FORMAT\s+AGE\n/);
        expect(table).toMatch(/^digits-edge1\s+edge1\s+csv\s+\d+s$/m);
        expect(table).toMatch(/^digits-eval\s+solar-corona-cloud\s+csv\s+\d+s$/m);
      });

      it('refuses an invalid job with 422 naming the field', async () => {
        const file = join(api.kubeconfigFile, '..', 'bad-fl.yaml');
        const write = (roundPolicy: string, trainers: string) =>
          writeFileSync(
            file,
            [
              'apiVersion: edgeai.io/v1alpha1',
              'kind: FederatedLearningJob',
              'metadata: {name: bad-fl}',
              'spec:',
              '  aggregationWorker: {model: {name: digits-fl}, template: {}}',
              `  trainingWorkers: ${trainers}`,
              `  roundPolicy: ${roundPolicy}`,
            ].join('\n'),
          );
        write('{minParticipants: 2}', '[]');
        const empty = await kubectl('create', '--validate=false', '-f', file);
        expect(empty.code).not.toBe(0);
        expect(empty.stderr).toContain('spec.trainingWorkers');
        write('{minParticipants: "150%"}', '[{dataset: {name: digits-edge0}, template: {}}]');
        const percent = await kubectl('create', '--validate=false', '-f', file);
        expect(percent.code).not.toBe(0);
        expect(percent.stderr).toContain('spec.roundPolicy.minParticipants');
        expect((await kubectl('get', 'fl', 'bad-fl')).code).not.toBe(0);
      });

      it('explains the job from the CRD schema', async () => {
        const out = await ok('explain', 'fl.spec.roundPolicy');
        expect(out).toMatch(/KIND:\s+FederatedLearningJob/);
        expect(out).toContain('minParticipants');
      });
    });
  },
);
