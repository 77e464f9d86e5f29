/** functions-framework entry for edge-infer: `functions-framework --target=edge-infer --source=dist/bin/ff/edge-infer.js`. */
import factory from '../../functions/edge-infer/index.js';
import { registerWithFramework } from './register.js';

await registerWithFramework('edge-infer', factory);
