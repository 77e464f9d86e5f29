/**
 * The cloud worker's stand-in for bench/offload, in a process of its own (so the bench process's
 * CPU time is its client's alone): answers every OIP binary request with a canned 1 x 10 FP32
 * answer. Sends { port } over IPC once listening.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';

const header = Buffer.from(
  JSON.stringify({
    model_name: 'cloud',
    outputs: [
      { name: 'probs', datatype: 'FP32', shape: [1, 10], parameters: { binary_data_size: 40 } },
    ],
  }),
);
const answer = Buffer.concat([header, Buffer.alloc(40)]);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () =>
    res
      .writeHead(200, {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
      })
      .end(answer),
  );
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
