/**
 * The development API server's certificates, made at every start: a CA and a serving certificate
 * it signs, for 127.0.0.1, ::1 and localhost. The CA goes into the kubeconfig
 * (certificate-authority-data), so kubectl and client-node verify the server as they verify a
 * cluster's, and send the bearer token, which kubectl refuses to do over plain HTTP.
 *
 * Node can parse certificates but not make them: node-forge (no dependencies of its own) builds
 * and signs them; the RSA keys come from node:crypto, which is native and fast.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';

interface ServingCertificates {
  /** PEM: the CA clients trust. */
  ca: string;
  /** PEM: the server's certificate and private key. */
  cert: string;
  key: string;
}

const lifetimeDays = 365;

function rsaKeys(): {
  privateKey: forge.pki.rsa.PrivateKey;
  publicKey: forge.pki.rsa.PublicKey;
  pem: string;
} {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const key = forge.pki.privateKeyFromPem(privateKey);
  return { privateKey: key, publicKey: forge.pki.rsa.setPublicKey(key.n, key.e), pem: privateKey };
}

function certificate(
  subject: string,
  publicKey: forge.pki.rsa.PublicKey,
  extensions: object[],
): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // A positive 16-byte serial, unique per issuer (RFC 5280), whose first byte is neither 0 nor
  // has its top bit set: DER wants the shortest encoding, node-forge strips at most one leading
  // zero byte, and OpenSSL refuses the rest ("illegal padding"; 1 start in 512 with the former
  // "0" + 16 random bytes).
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  cert.serialNumber = serial.toString('hex');
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 60_000); // a client's clock a little behind
  cert.validity.notAfter = new Date(now + lifetimeDays * 86_400_000);
  cert.setSubject([{ name: 'commonName', value: subject }]);
  cert.setExtensions(extensions);
  return cert;
}

/** A fresh CA and serving certificate for loopback (about 0.1 s). */
function servingCertificates(): ServingCertificates {
  const caKeys = rsaKeys();
  const ca = certificate('edgeai-dev-ca', caKeys.publicKey, [
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  ca.setIssuer(ca.subject.attributes);
  ca.sign(caKeys.privateKey, forge.md.sha256.create());

  const serverKeys = rsaKeys();
  const server = certificate('edgeai-dev-apiserver', serverKeys.publicKey, [
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        { type: 7, ip: '127.0.0.1' },
        { type: 7, ip: '::1' },
        { type: 2, value: 'localhost' },
      ],
    },
    { name: 'authorityKeyIdentifier', keyIdentifier: ca.generateSubjectKeyIdentifier().getBytes() },
  ]);
  server.setIssuer(ca.subject.attributes);
  server.sign(caKeys.privateKey, forge.md.sha256.create());

  return {
    ca: forge.pki.certificateToPem(ca),
    cert: forge.pki.certificateToPem(server),
    key: serverKeys.pem,
  };
}

export { servingCertificates };
export type { ServingCertificates };
