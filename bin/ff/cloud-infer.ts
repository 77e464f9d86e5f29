/** functions-framework entry for cloud-infer: `functions-framework --target=cloud-infer --source=dist/bin/ff/cloud-infer.js`. */
import factory from '../../functions/cloud-infer/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('cloud-infer', factory);
