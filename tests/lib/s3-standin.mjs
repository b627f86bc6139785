// A small S3 stand-in for the tests (path-style, one bucket, in memory) that
// does what s3rver does not: it verifies every request's SigV4 signature
// (AWS4-HMAC-SHA256, recomputed from the canonical request) and that its
// x-amz-content-sha256 equals the SHA-256 of the body received, implements
// AbortMultipartUpload and ListMultipartUploads, and fails on purpose.
//
//   const s3 = await startS3Standin({ bucket: 'snaps', accessKey: 'AK', secretKey: 'SK' });
//   s3.url; s3.requests (each {method, path, query, ok, code});
//   s3.failures.push({ when: (r) => r.query.partNumber === '2', status: 500, times: 3 });
//   s3.delayMs = 2000; s3.objects (Map key -> {body, meta, contentType});
//   s3.uploads (Map id -> {key, parts, initiated}); await s3.close();
import crypto from 'node:crypto';
import http from 'node:http';

const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const hmac = (k, s) => crypto.createHmac('sha256', k).update(s).digest();
const enc = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
const xmlEsc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function errorXml(code, message) {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xmlEsc(message)}</Message><RequestId>standin</RequestId></Error>`;
}

// Verifies SigV4; returns null when good, else [status, code, message].
export function verifySigV4(req, rawQuery, body, { accessKey, secretKey, region }) {
  const auth = req.headers.authorization || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/,]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return [403, 'AccessDenied', `no SigV4 Authorization header: ${auth.slice(0, 40)}`];
  const [, ak, date, reg, signedHeaders, signature] = m;
  if (ak !== accessKey) return [403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'];
  if (reg !== region) return [400, 'AuthorizationHeaderMalformed', `the region ${reg} is wrong; expecting ${region}`];
  const signed = signedHeaders.split(';');
  for (const h of ['host', 'x-amz-date', 'x-amz-content-sha256'])
    if (!signed.includes(h)) return [403, 'AccessDenied', `${h} is not signed`];
  const amzDate = req.headers['x-amz-date'] || '';
  if (!amzDate.startsWith(date)) return [403, 'AccessDenied', 'x-amz-date does not match the credential date'];
  const t = Date.parse(amzDate.replace(/^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/, '$1-$2-$3T$4:$5:$6Z'));
  if (!(Math.abs(Date.now() - t) < 15 * 60e3)) return [403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.'];
  const payload = req.headers['x-amz-content-sha256'];
  if (!/^[0-9a-f]{64}$/.test(payload || '')) return [400, 'InvalidArgument', 'x-amz-content-sha256 must be the hex SHA-256 of the body here'];
  if (sha256(body) !== payload) return [400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed."];
  // the canonical query: decoded, re-encoded, sorted
  const pairs = rawQuery
    ? rawQuery.split('&').map((p) => {
        const i = p.indexOf('=');
        const k = decodeURIComponent(i < 0 ? p : p.slice(0, i));
        const v = i < 0 ? '' : decodeURIComponent(p.slice(i + 1).replace(/\+/g, ' '));
        return [enc(k), enc(v)];
      })
    : [];
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1));
  const cq = pairs.map(([k, v]) => `${k}=${v}`).join('&');
  const path = req.url.split('?')[0];
  const ch = signed.map((h) => `${h}:${String(req.headers[h] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const creq = [req.method, path, cq, ch, signedHeaders, payload].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const sts = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(creq)].join('\n');
  const key = hmac(hmac(hmac(hmac('AWS4' + secretKey, date), region), 's3'), 'aws4_request');
  const want = crypto.createHmac('sha256', key).update(sts).digest('hex');
  if (!crypto.timingSafeEqual(Buffer.from(want), Buffer.from(signature)))
    return [403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.'];
  return null;
}

export async function startS3Standin({ bucket = 'snaps', accessKey = 'AKIDSTANDIN', secretKey = 'standin-secret', region = 'us-east-1' } = {}) {
  const st = {
    objects: new Map(),
    uploads: new Map(),
    requests: [],
    failures: [],
    delayMs: 0,
    url: '',
  };
  let nextUpload = 1;
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const [rawPath, rawQuery = ''] = req.url.split('?');
    const query = Object.fromEntries(new URLSearchParams(rawQuery));
    const rec = { method: req.method, path: rawPath, query, bytes: body.length, ok: false, code: '' };
    st.requests.push(rec);
    const send = (status, xml, headers = {}) => {
      rec.status = status;
      res.writeHead(status, { 'content-type': 'application/xml', ...headers });
      res.end(xml);
    };
    const fail = (status, code, message) => {
      rec.code = code;
      send(status, errorXml(code, message));
    };
    if (st.delayMs) await new Promise((r) => setTimeout(r, st.delayMs));
    const bad = verifySigV4(req, rawQuery, body, { accessKey, secretKey, region });
    if (bad) return fail(...bad);
    rec.ok = true;
    const f = st.failures.find((x) => x.times > 0 && x.when(rec));
    if (f) {
      f.times--;
      return fail(f.status || 500, f.code || 'InternalError', 'failing on purpose');
    }
    const parts = rawPath.split('/');
    if (parts[1] !== bucket) return fail(404, 'NoSuchBucket', 'The specified bucket does not exist');
    const key = parts.slice(2).map(decodeURIComponent).join('/');
    const m = req.method;
    if (!key && m === 'GET' && 'uploads' in query) {
      const ups = [...st.uploads.entries()].filter(([, u]) => u.key.startsWith(query.prefix || ''));
      return send(200, `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>${bucket}</Bucket><IsTruncated>false</IsTruncated>` +
        ups.map(([id, u]) => `<Upload><Key>${xmlEsc(u.key)}</Key><UploadId>${id}</UploadId><Initiated>${new Date(u.initiated).toISOString()}</Initiated></Upload>`).join('') +
        '</ListMultipartUploadsResult>');
    }
    if (!key && m === 'GET' && query['list-type'] === '2') {
      const keys = [...st.objects.keys()].filter((k) => k.startsWith(query.prefix || '')).sort();
      const start = query['continuation-token'] ? Number(query['continuation-token']) : 0;
      const max = Number(query['max-keys'] || 1000);
      const page = keys.slice(start, start + max);
      const more = start + max < keys.length;
      return send(200, `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>${bucket}</Name><Prefix>${xmlEsc(query.prefix || '')}</Prefix><KeyCount>${page.length}</KeyCount><MaxKeys>${max}</MaxKeys><IsTruncated>${more}</IsTruncated>` +
        page.map((k) => { const o = st.objects.get(k); return `<Contents><Key>${xmlEsc(k)}</Key><LastModified>${new Date(o.mtime).toISOString()}</LastModified><ETag>&quot;${o.etag}&quot;</ETag><Size>${o.body.length}</Size></Contents>`; }).join('') +
        (more ? `<NextContinuationToken>${start + max}</NextContinuationToken>` : '') + '</ListBucketResult>');
    }
    if (!key) return fail(400, 'InvalidRequest', 'unsupported bucket operation');
    const meta = Object.fromEntries(Object.entries(req.headers).filter(([h]) => h.startsWith('x-amz-meta-')));
    if (m === 'POST' && 'uploads' in query) {
      const id = `up${nextUpload++}-${crypto.randomBytes(6).toString('hex')}`;
      st.uploads.set(id, { key, parts: new Map(), initiated: Date.now(), meta, contentType: req.headers['content-type'] });
      return send(200, `<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult><Bucket>${bucket}</Bucket><Key>${xmlEsc(key)}</Key><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`);
    }
    if (query.uploadId !== undefined) {
      const u = st.uploads.get(query.uploadId);
      if (!u || u.key !== key) return fail(404, 'NoSuchUpload', 'The specified upload does not exist.');
      if (m === 'PUT') {
        const n = Number(query.partNumber);
        if (!(n >= 1 && n <= 10000)) return fail(400, 'InvalidArgument', 'bad partNumber');
        const etag = crypto.createHash('md5').update(body).digest('hex');
        u.parts.set(n, { body, etag });
        return send(200, '', { etag: `"${etag}"` });
      }
      if (m === 'DELETE') {
        st.uploads.delete(query.uploadId);
        return send(204, '');
      }
      if (m === 'POST') {
        const want = [...body.toString().matchAll(/<Part><PartNumber>(\d+)<\/PartNumber><ETag>([^<]*)<\/ETag><\/Part>/g)];
        if (!want.length) return fail(400, 'MalformedXML', 'no parts');
        const bufs = [];
        for (const [i, [, n, e]] of want.entries()) {
          const p = u.parts.get(Number(n));
          if (Number(n) !== i + 1 || !p || e.replace(/&quot;|"/g, '') !== p.etag) return fail(400, 'InvalidPart', `part ${n}`);
          if (i < want.length - 1 && p.body.length < 5 * 1024 * 1024) return fail(400, 'EntityTooSmall', `part ${n} is under 5 MiB`);
          bufs.push(p.body);
        }
        const all = Buffer.concat(bufs);
        st.objects.set(key, { body: all, meta: u.meta, contentType: u.contentType, mtime: Date.now(), etag: `${crypto.createHash('md5').update(all).digest('hex')}-${want.length}` });
        st.uploads.delete(query.uploadId);
        return send(200, `<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult><Key>${xmlEsc(key)}</Key><ETag>&quot;x-${want.length}&quot;</ETag></CompleteMultipartUploadResult>`);
      }
    }
    if (m === 'PUT') {
      const etag = crypto.createHash('md5').update(body).digest('hex');
      st.objects.set(key, { body, meta, contentType: req.headers['content-type'], mtime: Date.now(), etag });
      return send(200, '', { etag: `"${etag}"` });
    }
    const o = st.objects.get(key);
    if (m === 'DELETE') {
      st.objects.delete(key);
      return send(204, '');
    }
    if (!o) return fail(404, 'NoSuchKey', 'The specified key does not exist.');
    if (m === 'GET' || m === 'HEAD') {
      rec.status = 200;
      res.writeHead(200, { 'content-length': o.body.length, etag: `"${o.etag}"`, ...o.meta });
      return res.end(m === 'GET' ? o.body : undefined);
    }
    return fail(405, 'MethodNotAllowed', 'unsupported');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  st.url = `http://127.0.0.1:${server.address().port}`;
  st.bucket = bucket;
  st.accessKey = accessKey;
  st.secretKey = secretKey;
  st.region = region;
  st.close = () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); });
  return st;
}
