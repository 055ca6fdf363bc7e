#!/usr/bin/env node
// An S3 test server for skippr's integration tests: s3rver on 127.0.0.1 and
// an ephemeral port, behind a small proxy that counts requests by kind,
// records the most requests in flight at once, and injects faults on
// command. Everything listens on 127.0.0.1 only.
//
//   node s3server.js --dir DIR --buckets a,b [--tls-cert PEM --tls-key PEM]
//                    [--port N] [--foreground]
//
// --port: the proxy's port (default: an ephemeral one). --foreground: run
// until SIGINT or SIGTERM rather than until stdin closes (scripts/
// local-s3.sh, the S3 walkthrough on a local S3).
// With --tls-cert and --tls-key the proxy speaks HTTPS with that
// certificate (s3rver behind it stays plain HTTP).
// Prints one JSON line when ready: {"endpoint": "http://127.0.0.1:PORT"}.
// Control endpoints on the proxy (not S3 paths):
//   GET  /__stats            counts by kind (and `answered`: 2xx answers by
//                            kind), max in flight, faults injected,
//                            connections accepted (this request's included)
//   POST /__reset            zero the counters
//   POST /__faults  {rate, kinds, seed, complete_error_rate, only, nth,
//                   persist, max_put_bytes, body_idle_ms, listed_empty}
//                   listed_empty: listings show every object at 0
//                   bytes, with its ETag (an object listed before its
//                   bytes were stored);
//                   body_idle_ms: a write whose body stops arriving for
//                   that long answers 400 RequestTimeout, as S3 does after
//                   about 20 s (the default); max_put_bytes > 0: a
//                   PutObject body over it answers 400 EntityTooLarge (S3's
//                   limit is 5 GiB; tests lower it). kinds:
//                   503, 500, 501 (NotImplemented), NoSuchBucket (404) and
//                   AccessDenied (403) (a bucket deleted or a permission
//                   revoked under a run), reset, truncate,
//                   complete_error, lost_reply
//                   (the request is carried out, then the connection is
//                   cut before the answer), kill_after (carried out, then
//                   the process kill_pid is killed with SIGKILL before the
//                   answer: a crash right after the request was sent),
//                   late_write (a PutObject or Complete: the connection is
//                   cut at once, the write is carried out late_ms later,
//                   and for meta_lag_ms after that a HEAD of its object
//                   shows no x-amz-meta-*: bytes before metadata),
//                   late_part (an UploadPart is
//                   carried out and answered, then its part is written
//                   again with other bytes, as a late request of a
//                   crashed run would); rate 0 turns faults off;
//                   complete_error_rate applies to CompleteMultipartUpload
//                   requests only; `only`, a list of request kinds, limits
//                   faults to those kinds; nth > 0 fails the nth faultable
//                   request from now on with kinds[0] (and, with persist,
//                   every later one) instead of failing at random
//   POST /__auth    {verify}  with verify true, every S3 request's SigV4
//                   signature is checked against the secret S3RVER (as
//                   --verify-signatures does from the start); a wrong one
//                   answers 403 SignatureDoesNotMatch
//   POST /__tokens  {require}  with require true, every S3 request must carry
//                   an x-amz-security-token "skt.SOURCE.EXPIRY.N" (as
//                   tests/tools/aws_creds.py gives out) that has not lapsed:
//                   none answers 403 AccessDenied, a lapsed one 400
//                   ExpiredToken; /__stats counts requests by SOURCE
//                   (tokens) and the refusals (token_refused)
// x-amz-checksum-crc32c is checked as S3 does (s3rver ignores it): on
// PutObject and UploadPart against the body, on CompleteMultipartUpload
// (x-amz-checksum-type FULL_OBJECT) against the parts' bytes in order, and
// each part's ChecksumCRC32C in the Complete body against its upload. A
// mismatch answers 400 BadDigest; /__stats counts `checksums` verified,
// mismatched and absent (writes that carried none).
// x-amz-content-sha256 of those writes is checked as S3 does: a hex SHA-256
// must match the body (else 400 XAmzContentSHA256Mismatch); /__stats
// counts `payloads` signed (a hash that matched), unsigned
// (UNSIGNED-PAYLOAD) and mismatched; other values (the SDKs' STREAMING-*
// chunked forms) are not checked.
// UploadPartCopy (which s3rver answers 501) is emulated: the source range
// read back and uploaded as the part; /__stats counts `copied` parts and
// bytes.
// HEAD with x-amz-checksum-mode: ENABLED answers the x-amz-checksum-crc32c
// the object was written with, as S3 does. /__stats lists `unconditional`
// PutObjects and Completes (neither If-None-Match nor If-Match).
// PutObject and CompleteMultipartUpload with If-None-Match: * answer 412
// PreconditionFailed when the key exists, as AWS does (s3rver ignores the
// header); the proxy remembers the keys written through it. PutObject and
// CompleteMultipartUpload with If-Match answer 412 unless the key's ETag is the one given (404 when
// there is no such key), and a conditional write while another to the
// same key is under way answers 409 ConditionalRequestConflict, as AWS.
// s3rver implements neither ListMultipartUploads nor AbortMultipartUpload,
// so the proxy tracks uploads itself (create, complete, abort), answers
// GET ?uploads and DELETE ?uploadId. Its Delimiter listings come back empty,
// so the proxy answers them itself, in one page: a '/' listing of a folder
// prefix from s3rver's folders on disk (listFolder), any other by listing
// plainly and grouping the keys into CommonPrefixes.
// Exits when stdin closes, so a test that dies leaves nothing running
// (unless --foreground).
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');
const S3rver = require('s3rver');
require('./settled_writes'); // PUTs answered once stored (see there)

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 ? process.argv[i + 1] : def;
}

const dir = arg('dir');
const tlsCert = arg('tls-cert');
const tlsKey = arg('tls-key');
const buckets = (arg('buckets', '') || '').split(',').filter(Boolean);
if (!dir) {
  console.error('usage: s3server.js --dir DIR --buckets a,b');
  process.exit(2);
}

let counts = {};
let inflight = 0;
let maxInflight = 0;
let connections = 0;
let injected = {};
let answered = {}; // 2xx answers by kind: writes that took effect
let faults = { rate: 0, kinds: [], seed: 1, complete_error_rate: 0 };
let faultable_seen = 0; // faultable requests since the last /__faults
// --verify-signatures, or POST /__auth {verify}: check each request's
// Signature Version 4 with the one account's secret, as S3 does (s3rver
// checks only the key id); a mismatch answers 403 SignatureDoesNotMatch.
let verifySignatures = process.argv.includes('--verify-signatures');
let signatureRefused = 0;
const SECRET = 'S3RVER';

// RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()*).
function uriEncode(v) {
  return encodeURIComponent(v).replace(/[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

function hmac(key, data) {
  return crypto.createHmac('sha256', key).update(data).digest();
}

// Whether req's Authorization header holds a valid SigV4 signature.
function signatureHolds(req) {
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/
    .exec(req.headers.authorization || '');
  if (!m) return false;
  const [, , date, region, signed, signature] = m;
  const u = new URL(req.url, 'http://x');
  const query = [...u.searchParams.entries()]
    .map(([k, v]) => [uriEncode(k), uriEncode(v)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 :
                     a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([k, v]) => k + '=' + v).join('&');
  const names = signed.split(';');
  const headers = names.map((n) => n + ':' +
    String(req.headers[n] === undefined ? '' : req.headers[n])
      .trim().replace(/\s+/g, ' ') + '\n').join('');
  const canonical = [req.method, req.url.split('?')[0], query, headers,
                     signed, req.headers['x-amz-content-sha256'] ||
                     'UNSIGNED-PAYLOAD'].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', req.headers['x-amz-date'], scope,
                  crypto.createHash('sha256').update(canonical).digest('hex')]
    .join('\n');
  let key = hmac('AWS4' + SECRET, date);
  key = hmac(hmac(hmac(key, region), 's3'), 'aws4_request');
  return hmac(key, toSign).toString('hex') === signature;
}
const uploads = new Map(); // uploadId -> { bucket, key, initiated }
const written = new Set(); // "bucket/key" of objects written through here
const etags = new Map();    // "bucket/key" -> ETag of its last write here
const pending = new Set();  // "bucket/key" of conditional writes under way
const sums = new Map();     // "bucket/key" -> x-amz-checksum-crc32c it was written with
const bareUntil = new Map(); // "bucket/key" -> ms until which HEAD shows no x-amz-meta-*
let unconditional = []; // "bucket/key" of PUTs and Completes with no condition
let preconditionFailed = 0;
let rngState = 1;
let requireToken = false;
let checksums = { verified: 0, mismatched: 0, absent: 0 };
let payloads = { signed: 0, unsigned: 0, mismatched: 0 };
let copied = { parts: 0, bytes: 0 }; // UploadPartCopy emulated
const partBodies = new Map(); // uploadId -> Map(partNumber -> Buffer)

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82F63B78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

function crc32c(bufs) {
  let c = 0xFFFFFFFF;
  for (const b of bufs) {
    for (let i = 0; i < b.length; i++) c = CRC32C_TABLE[(c ^ b[i]) & 0xFF] ^ (c >>> 8);
  }
  const v = (c ^ 0xFFFFFFFF) >>> 0;
  const out = Buffer.alloc(4);
  out.writeUInt32BE(v);
  return out.toString('base64');
}

function badDigest(res, what) {
  checksums.mismatched++;
  xmlError(res, 400, 'BadDigest', 'The CRC32C you specified did not match ' +
           `the calculated checksum (${what}).`);
}
let tokens = {};       // SOURCE -> requests carrying its tokens
let tokenRefused = {}; // 'missing' | 'expired' -> requests refused

function rnd() {
  // xorshift32: reproducible fault sequences from a seed.
  rngState ^= rngState << 13; rngState >>>= 0;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5; rngState >>>= 0;
  return rngState / 4294967296;
}

// The kind of a request, for counts and faults. A state's claim on a sink
// (its _skippr/claims/ object: one GET a run, one PUT the first time) is
// 'claim_get' or 'claim_put', and the preflight's probe object (a GET, a
// PUT and a DELETE of _skippr/probe-*) 'probe_get', 'probe_put' and
// 'probe_delete', apart from the data's requests.
function kindOf(req) {
  const kind = dataKindOf(req);
  if (req.url.includes('/_skippr/claims/')) return 'claim_' + kind;
  return req.url.includes('/_skippr/probe-') ? 'probe_' + kind : kind;
}

function dataKindOf(req) {
  const u = new URL(req.url, 'http://x');
  const q = u.searchParams;
  const m = req.method;
  const parts = u.pathname.split('/').filter(Boolean);
  const isBucket = parts.length <= 1;
  if (m === 'GET' && q.has('list-type')) return 'list';
  if (m === 'GET' && q.has('uploads')) return 'list_uploads';
  if (m === 'GET' && isBucket) return 'list_v1';
  if (m === 'GET') return 'get';
  if (m === 'HEAD') return 'head';
  if (m === 'PUT' && q.has('partNumber') && req.headers['x-amz-copy-source']) {
    return 'upload_part_copy';
  }
  if (m === 'PUT' && q.has('partNumber')) return 'upload_part';
  if (m === 'PUT') return 'put';
  if (m === 'POST' && q.has('uploads')) return 'create_multipart';
  if (m === 'POST' && q.has('uploadId')) return 'complete_multipart';
  if (m === 'DELETE' && q.has('uploadId')) return 'abort_multipart';
  if (m === 'DELETE') return 'delete';
  return m.toLowerCase();
}

// A request to s3rver itself (unsigned: it lets those through), its
// whole answer's body as a Buffer.
function s3rverCall(port, method, path, headers, body) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method, path, headers },
      (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
                                      body: Buffer.concat(chunks) }));
      });
    r.on('error', reject);
    r.end(body);
  });
}

function xmlError(res, status, code, message) {
  const body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + code +
               '</Code><Message>' + escapeXml(message || code) + '</Message></Error>';
  res.writeHead(status, { 'content-type': 'application/xml',
                          'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// UploadPartCopy, which s3rver does not have (501): the source's range is
// read from s3rver and uploaded as the part, and the answer is S3's
// CopyPartResult with the part's ETag and CRC32C. A range past the
// source's end is S3's 400 InvalidRange; a missing source 404 NoSuchKey.
async function uploadPartCopy(req, res, port, id, partNumber, fault) {
  const src = decodeURIComponent(req.headers['x-amz-copy-source']).replace(/^\//, '');
  const srcPath = '/' + src.split('/').map(encodeURIComponent).join('/');
  const range = req.headers['x-amz-copy-source-range'];
  const got = await s3rverCall(port, 'GET', srcPath, range ? { range } : {});
  if (got.status === 404) return xmlError(res, 404, 'NoSuchKey', src);
  const m = /^bytes=(\d+)-(\d+)$/.exec(range || '');
  if (got.status >= 300 || (range && (!m ||
      got.body.length !== Number(m[2]) - Number(m[1]) + 1))) {
    return xmlError(res, 400, 'InvalidRange', `${range} of ${src}`);
  }
  const put = await s3rverCall(port, 'PUT', req.url,
                               { 'content-length': got.body.length }, got.body);
  if (put.status !== 200) return xmlError(res, put.status, 'InternalError', 'part');
  if (!partBodies.has(id)) partBodies.set(id, new Map());
  partBodies.get(id).set(partNumber, got.body);
  copied.parts++;
  copied.bytes += got.body.length;
  if (fault === 'lost_reply') return res.socket && res.socket.destroy();
  const xml = '<?xml version="1.0" encoding="UTF-8"?><CopyPartResult>' +
              `<LastModified>${new Date().toISOString()}</LastModified>` +
              `<ETag>&quot;${(put.headers.etag || '').replace(/"/g, '')}&quot;</ETag>` +
              `<ChecksumCRC32C>${crc32c([got.body])}</ChecksumCRC32C></CopyPartResult>`;
  res.writeHead(200, { 'content-type': 'application/xml',
                       'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

function getText(port, path, headers) {
  return new Promise((resolve, reject) => {
    const r = http.request({ host: '127.0.0.1', port, method: 'GET', path, headers },
      (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
    r.on('error', reject);
    r.end();
  });
}

const OBJECT_SUFFIX = '._S3rver_object';

// Whether folder f of s3rver's store holds an object, at any depth.
function holdsObject(f) {
  for (const e of fs.readdirSync(f, { withFileTypes: true })) {
    if (e.isDirectory() ? holdsObject(path.join(f, e.name))
                        : e.name.endsWith(OBJECT_SUFFIX)) return true;
  }
  return false;
}

// The <Contents> and CommonPrefixes of a '/' listing of a prefix that is
// a folder ('' or ending in '/'), read from s3rver's store: its folders
// are the key's segments, and an object is its data file, its .md5 (the
// ETag) and its metadata. s3rver answers a plain LIST by walking and
// stat-ing its whole bucket, so grouping plain pages cost seconds per
// request at 20,000 keys; a folder costs what it holds. null when an
// object's ETag is not on disk yet (s3rver writes it lazily): the caller
// then lists plainly.
function listFolder(bucket, prefix) {
  const base = path.join(dir, bucket, prefix);
  let entries;
  try {
    entries = fs.readdirSync(base, { withFileTypes: true });
  } catch (e) {
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return { contents: [], prefixes: [] };
    throw e;
  }
  const contents = [];
  const prefixes = [];
  for (const e of entries) {
    const p = path.join(base, e.name);
    if (e.isDirectory()) {
      if (holdsObject(p)) prefixes.push(prefix + e.name + '/');
      continue;
    }
    if (!e.name.endsWith(OBJECT_SUFFIX)) continue;
    let st, md5;
    try {
      st = fs.statSync(p);
      md5 = fs.readFileSync(p + '.md5', 'utf8');
    } catch (err) {
      if (err.code === 'ENOENT') return null;
      throw err;
    }
    const key = prefix + e.name.slice(0, -OBJECT_SUFFIX.length);
    const modified = new Date(Math.floor(st.mtimeMs / 1000) * 1000);
    contents.push({ key, xml: `<Contents><Key>${escapeXml(key)}</Key>` +
      `<LastModified>${modified.toISOString()}</LastModified>` +
      `<ETag>&quot;${md5}&quot;</ETag><Size>${st.size}</Size>` +
      '<StorageClass>STANDARD</StorageClass></Contents>' });
  }
  const byKey = (x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y));
  contents.sort((x, y) => byKey(x.key, y.key));
  prefixes.sort(byKey);
  return { contents, prefixes };
}

async function listWithDelimiter(req, res, port, bucket, params) {
  const prefix = params.get('prefix') || '';
  const delim = params.get('delimiter');
  if (delim === '/' && (prefix === '' || prefix.endsWith('/'))) {
    let r;
    try {
      r = listFolder(bucket, prefix);
    } catch (e) {
      res.writeHead(500);
      return res.end();
    }
    if (r) {
      return sendGrouped(res, bucket, prefix,
                         r.contents.map((c) => c.xml).join(''), r.prefixes);
    }
  }
  const keys = [];
  let token = null;
  try {
    for (;;) {
      const q = new URLSearchParams({ 'list-type': '2', prefix, 'max-keys': '1000' });
      if (token) q.set('continuation-token', token);
      const r = await getText(port, `/${bucket}?${q}`, req.headers);
      if (r.status !== 200) {
        res.writeHead(r.status, { 'content-type': 'application/xml' });
        return res.end(r.body);
      }
      const re = /<Contents>([\s\S]*?)<\/Contents>/g;
      let m;
      while ((m = re.exec(r.body))) {
        const c = m[1];
        keys.push({ xml: m[0], key: (/<Key>([\s\S]*?)<\/Key>/.exec(c) || [])[1] || '' });
      }
      const t = /<NextContinuationToken>([^<]*)<\/NextContinuationToken>/.exec(r.body);
      if (!/<IsTruncated>true<\/IsTruncated>/.test(r.body) || !t) break;
      token = t[1];
    }
  } catch (e) {
    res.writeHead(500);
    return res.end();
  }
  const prefixes = new Set();
  let contents = '';
  for (const k of keys) {
    const rest = k.key.slice(prefix.length);
    const i = rest.indexOf(delim);
    if (i >= 0) prefixes.add(prefix + rest.slice(0, i + delim.length));
    else contents += k.xml;
  }
  sendGrouped(res, bucket, prefix, contents, [...prefixes].sort());
}

// A plain listing from s3rver with every object at 0 bytes (the fault
// listed_empty; Delimiter listings get it in sendGrouped).
async function listEmptySizes(req, res, port, u) {
  let r;
  try {
    r = await getText(port, u.pathname + u.search, req.headers);
  } catch (e) {
    res.writeHead(500);
    return res.end();
  }
  const body = r.body.replace(/<Size>\d+<\/Size>/g, '<Size>0</Size>');
  res.writeHead(r.status, { 'content-type': 'application/xml',
                            'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// A whole delimiter listing in one page: contents (its <Contents> XML),
// then the common prefixes, in order.
function sendGrouped(res, bucket, prefix, contents, prefixes) {
  if (faults.listed_empty) {
    // Each object at 0 bytes with its final ETag, as s3rver listed one
    // whose PUT was still writing (before settled_writes.js).
    contents = contents.replace(/<Size>\d+<\/Size>/g, '<Size>0</Size>');
  }
  let xml = '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>' +
            `<Name>${bucket}</Name><Prefix>${escapeXml(prefix)}</Prefix>` +
            '<IsTruncated>false</IsTruncated>' + contents;
  for (const p of prefixes) {
    xml += `<CommonPrefixes><Prefix>${escapeXml(p)}</Prefix></CommonPrefixes>`;
  }
  xml += '</ListBucketResult>';
  res.writeHead(200, { 'content-type': 'application/xml',
                       'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

function escapeXml(s) {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function json(res, code, body) {
  const s = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json',
                        'content-length': Buffer.byteLength(s) });
  res.end(s);
}

async function main() {
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: !process.env.S3RVER_VERBOSE,
    directory: path.resolve(dir),
    configureBuckets: buckets.map((name) => ({ name })),
  });
  const { port: s3port } = await server.run();

  const makeServer = (handler) => (tlsCert
    ? https.createServer({ cert: fs.readFileSync(tlsCert),
                           key: fs.readFileSync(tlsKey) }, handler)
    : http.createServer(handler));
  const proxy = makeServer((req, res) => {
    if (req.url.startsWith('/__stats')) {
      return json(res, 200, { counts, max_inflight: maxInflight, inflight,
                              connections,
                              injected, open_uploads: uploads.size,
                              precondition_failed: preconditionFailed,
                              tokens, token_refused: tokenRefused,
                              signatures_refused: signatureRefused,
                              checksums, payloads, copied, answered,
                              unconditional });
    }
    if (req.url.startsWith('/__reset')) {
      counts = {}; maxInflight = 0; injected = {}; preconditionFailed = 0;
      connections = 0; tokens = {}; tokenRefused = {};
      checksums = { verified: 0, mismatched: 0, absent: 0 };
      payloads = { signed: 0, unsigned: 0, mismatched: 0 };
      copied = { parts: 0, bytes: 0 };
      answered = {};
      unconditional = [];
      return json(res, 200, { ok: true });
    }
    if (req.url.startsWith('/__faults')) {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        faults = Object.assign({ rate: 0, kinds: [], seed: 1, complete_error_rate: 0,
                                 only: null, nth: 0, persist: false },
                               JSON.parse(body || '{}'));
        rngState = (faults.seed >>> 0) || 1;
        faultable_seen = 0;
        json(res, 200, faults);
      });
      return;
    }
    if (req.url.startsWith('/__tokens')) {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        requireToken = !!JSON.parse(body || '{}').require;
        json(res, 200, { require: requireToken });
      });
      return;
    }
    if (req.url.startsWith('/__auth')) {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        verifySignatures = !!JSON.parse(body || '{}').verify;
        json(res, 200, { verify: verifySignatures });
      });
      return;
    }
    if (verifySignatures && !signatureHolds(req)) {
      req.resume();
      signatureRefused++;
      const body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>' +
                   'SignatureDoesNotMatch</Code><Message>The request signature ' +
                   'we calculated does not match the signature you provided.' +
                   '</Message></Error>';
      res.writeHead(403, { 'content-type': 'application/xml',
                           'content-length': Buffer.byteLength(body) });
      return res.end(req.method === 'HEAD' ? undefined : body);
    }
    if (requireToken) {
      const m = /^skt\.([a-z-]+)\.(\d+)\.\d+$/.exec(
        req.headers['x-amz-security-token'] || '');
      const why = !m ? 'missing' : Number(m[2]) * 1000 < Date.now() ? 'expired' : null;
      if (why) {
        req.resume();
        tokenRefused[why] = (tokenRefused[why] || 0) + 1;
        const code = why === 'missing' ? 'AccessDenied' : 'ExpiredToken';
        const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code></Error>`;
        res.writeHead(why === 'missing' ? 403 : 400,
                      { 'content-type': 'application/xml',
                        'content-length': Buffer.byteLength(body) });
        return res.end(body);
      }
      tokens[m[1]] = (tokens[m[1]] || 0) + 1;
    }
    const kind = kindOf(req);
    counts[kind] = (counts[kind] || 0) + 1;
    res.on('finish', () => {
      if (res.statusCode >= 200 && res.statusCode < 300) {
        answered[kind] = (answered[kind] || 0) + 1;
      }
    });
    inflight++;
    maxInflight = Math.max(maxInflight, inflight);
    let done = false;
    const finish = () => { if (!done) { done = true; inflight--; } };
    res.on('close', finish);

    const u = new URL(req.url, 'http://x');
    const parts = u.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const bucket = parts[0];
    const key = parts.slice(1).join('/');
    if (kind === 'list' && u.searchParams.has('delimiter')) {
      // s3rver answers Delimiter listings with nothing at all: list the
      // prefix plainly and group the keys here.
      req.resume();
      return listWithDelimiter(req, res, s3port, bucket, u.searchParams);
    }
    if (kind === 'list' && faults.listed_empty) {
      req.resume();
      return listEmptySizes(req, res, s3port, u);
    }
    if (kind === 'list_uploads') {
      req.resume();
      const prefix = u.searchParams.get('prefix') || '';
      let xml = '<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult>' +
                `<Bucket>${bucket}</Bucket><IsTruncated>false</IsTruncated>`;
      for (const [id, up] of uploads) {
        if (up.bucket !== bucket || !up.key.startsWith(prefix)) continue;
        xml += `<Upload><Key>${escapeXml(up.key)}</Key><UploadId>${id}</UploadId>` +
               `<Initiated>${up.initiated}</Initiated></Upload>`;
      }
      xml += '</ListMultipartUploadsResult>';
      res.writeHead(200, { 'content-type': 'application/xml',
                           'content-length': Buffer.byteLength(xml) });
      return res.end(xml);
    }

    if (kind === 'abort_multipart') {
      // s3rver answers 405 to AbortMultipartUpload: emulate it.
      req.resume();
      const id = u.searchParams.get('uploadId');
      if (!uploads.has(id)) {
        const body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code></Error>';
        res.writeHead(404, { 'content-type': 'application/xml',
                             'content-length': Buffer.byteLength(body) });
        return res.end(body);
      }
      uploads.delete(id);
      partBodies.delete(id);
      res.writeHead(204);
      return res.end();
    }

    const slot = `${bucket}/${key}`;
    // Conditions hold for every key, the claims' and the probe's too.
    const wkind = dataKindOf(req);
    const ifMatch = wkind === 'put' || wkind === 'complete_multipart'
      ? req.headers['if-match'] : undefined;
    const conditional = ((wkind === 'put' || wkind === 'complete_multipart') &&
                         req.headers['if-none-match'] === '*') || ifMatch;
    function refuse(status, code) {
      req.resume();
      if (status === 412) preconditionFailed++;
      const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code>` +
                   '<Message>At least one of the pre-conditions you specified did not hold</Message></Error>';
      res.writeHead(status, { 'content-type': 'application/xml',
                              'content-length': Buffer.byteLength(body) });
      return res.end(body);
    }
    if (conditional && pending.has(slot)) return refuse(409, 'ConditionalRequestConflict');
    if ((wkind === 'put' || wkind === 'complete_multipart') &&
        req.headers['if-none-match'] === '*' && written.has(slot)) {
      return refuse(412, 'PreconditionFailed');
    }
    if (ifMatch && !written.has(slot)) return refuse(404, 'NoSuchKey');
    if (ifMatch && ifMatch.replace(/"/g, '') !== etags.get(slot)) {
      return refuse(412, 'PreconditionFailed');
    }
    if (conditional) {
      pending.add(slot);
      res.on('close', () => pending.delete(slot));
    } else if (kind === 'put' || kind === 'complete_multipart') {
      unconditional.push(slot);
    }

    let fault = null;
    const faultable = !faults.only || faults.only.includes(kind);
    if (!faultable) {
      // no fault for this kind of request
    } else if (faults.nth > 0) {
      faultable_seen++;
      if (faultable_seen === faults.nth ||
          (faults.persist && faultable_seen > faults.nth)) {
        fault = faults.kinds[0] || '500';
      }
    } else if (kind === 'complete_multipart' && faults.complete_error_rate > 0 &&
        rnd() < faults.complete_error_rate) {
      fault = 'complete_error';
    } else if (faults.rate > 0 && rnd() < faults.rate) {
      const usable = faults.kinds.filter((k) =>
        k !== 'complete_error' || kind === 'complete_multipart');
      if (usable.length) fault = usable[Math.floor(rnd() * usable.length)];
    }
    if (fault) injected[fault] = (injected[fault] || 0) + 1;
    const answers = { 503: [503, 'SlowDown'], 500: [500, 'InternalError'],
                      501: [501, 'NotImplemented'],
                      NoSuchBucket: [404, 'NoSuchBucket'],
                      AccessDenied: [403, 'AccessDenied'] };
    if (answers[fault]) {
      req.resume();
      const [status, code] = answers[fault];
      const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>injected</Message></Error>`;
      res.writeHead(status, { 'content-type': 'application/xml',
                              'content-length': Buffer.byteLength(body) });
      if (req.method === 'HEAD') return res.end();
      return res.end(body);
    }
    if (fault === 'reset') {
      req.resume();
      return req.socket.destroy();
    }
    if (fault === 'complete_error') {
      req.resume();
      const body = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>injected after 200</Message></Error>';
      res.writeHead(200, { 'content-type': 'application/xml',
                           'content-length': Buffer.byteLength(body) });
      return res.end(body);
    }
    if (kind === 'upload_part_copy') {
      req.resume();
      uploadPartCopy(req, res, s3port, u.searchParams.get('uploadId'),
                     Number(u.searchParams.get('partNumber')), fault)
        .catch(() => res.socket && res.socket.destroy());
      return;
    }
    if (kind === 'put' || kind === 'upload_part' || kind === 'complete_multipart') {
      // Writes are small in the tests: take the whole body, check its
      // checksum, then forward it.
      const chunks = [];
      // S3 answers 400 RequestTimeout to a body that stops arriving for
      // about 20 s (a client paused mid-request); body_idle_ms sets it.
      const idleMs = faults.body_idle_ms || 20000;
      let idleTimer = null;
      let timedOut = false;
      const arm = () => {
        clearTimeout(idleTimer);
        idleTimer = setTimeout(() => {
          timedOut = true;
          res.on('finish', () => req.socket.destroy());
          xmlError(res, 400, 'RequestTimeout',
                   `no body bytes for ${idleMs} ms`);
        }, idleMs);
      };
      arm();
      req.on('data', (d) => { chunks.push(d); arm(); });
      req.on('end', () => {
        clearTimeout(idleTimer);
        if (timedOut) return;
        const body = Buffer.concat(chunks);
        const hash = req.headers['x-amz-content-sha256'];
        if (hash === 'UNSIGNED-PAYLOAD') {
          payloads.unsigned++;
        } else if (/^[0-9a-f]{64}$/.test(hash || '')) {
          if (hash !== crypto.createHash('sha256').update(body).digest('hex')) {
            payloads.mismatched++;
            const e = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>' +
                      'XAmzContentSHA256Mismatch</Code></Error>';
            res.writeHead(400, { 'content-type': 'application/xml',
                                 'content-length': Buffer.byteLength(e) });
            return res.end(e);
          }
          payloads.signed++;
        }
        if (kind === 'put' && faults.max_put_bytes > 0 &&
            body.length > faults.max_put_bytes) {
          // S3 takes at most 5 GiB in one PutObject; a test lowers that.
          return xmlError(res, 400, 'EntityTooLarge',
                          `${body.length} bytes in one PUT`);
        }
        const sent = req.headers['x-amz-checksum-crc32c'];
        const id = u.searchParams.get('uploadId');
        if (kind === 'upload_part') {
          if (!partBodies.has(id)) partBodies.set(id, new Map());
          const num = Number(u.searchParams.get('partNumber'));
          partBodies.get(id).set(num, body);
          if (fault === 'late_part') {
            // Once answered, the part is written again with other bytes,
            // as a crashed run's request that lands late would.
            res.on('finish', () => {
              const other = Buffer.from(body);
              if (other.length) other[0] ^= 0xff;
              partBodies.get(id)?.set(num, other);
              s3rverCall(s3port, 'PUT', req.url,
                         { 'content-length': other.length }, other)
                .catch(() => {});
            });
          }
        }
        if (kind === 'complete_multipart') {
          const parts = partBodies.get(id) || new Map();
          const xml = body.toString();
          const re = /<Part>\s*<PartNumber>(\d+)<\/PartNumber>[\s\S]*?<\/Part>/g;
          const bufs = [];
          let m;
          while ((m = re.exec(xml))) {
            const pb = parts.get(Number(m[1])) || Buffer.alloc(0);
            bufs.push(pb);
            const pc = /<ChecksumCRC32C>([^<]+)<\/ChecksumCRC32C>/.exec(m[0]);
            if (pc && pc[1] !== crc32c([pb])) return badDigest(res, 'part ' + m[1]);
          }
          if (sent) {
            if (sent !== crc32c(bufs)) return badDigest(res, 'object');
            checksums.verified++;
          } else {
            checksums.absent++;
          }
        } else if (sent) {
          if (sent !== crc32c([body])) return badDigest(res, kind);
          checksums.verified++;
        } else {
          checksums.absent++;
        }
        if (fault === 'late_write') return writeLate(body);
        forward(body);
      });
      return;
    }
    forward(null);

    // HEAD as S3 answers it: with x-amz-checksum-mode: ENABLED, the
    // checksum the object was written with; without x-amz-meta-* while
    // a late Complete's object is still "bare" (s3rver writes an
    // object's bytes before its metadata; this makes that window last).
    function headAnswer(h) {
      if (req.headers['x-amz-checksum-mode'] === 'ENABLED' && sums.get(slot)) {
        h['x-amz-checksum-crc32c'] = sums.get(slot);
      }
      if ((bareUntil.get(slot) || 0) > Date.now()) {
        for (const name of Object.keys(h)) {
          if (name.startsWith('x-amz-meta-')) delete h[name];
        }
      }
    }

    // late_write: the connection is cut at once, as if the answer were
    // lost, and the PutObject or Complete is carried out late_ms later;
    // its object then shows no metadata for meta_lag_ms.
    function writeLate(body) {
      res.socket && res.socket.destroy();
      const headers = { 'content-length': body.length };
      for (const [k, v] of Object.entries(req.headers)) {
        if (k.startsWith('x-amz-meta-') || k === 'content-type') headers[k] = v;
      }
      setTimeout(() => {
        s3rverCall(s3port, req.method, req.url, headers, body).then((ur) => {
          if (ur.status < 200 || ur.status >= 300) return;
          const id = u.searchParams.get('uploadId');
          if (id) {
            uploads.delete(id);
            partBodies.delete(id);
          }
          written.add(slot);
          etags.set(slot, String(ur.headers.etag || '').replace(/"/g, ''));
          sums.set(slot, req.headers['x-amz-checksum-crc32c'] || '');
          bareUntil.set(slot, Date.now() + (faults.meta_lag_ms || 1000));
        }).catch(() => {});
      }, faults.late_ms || 1000);
    }

    function forward(body) {
    const up = http.request({ host: '127.0.0.1', port: s3port, method: req.method,
                              path: req.url, headers: req.headers }, (ur) => {
      if (kind === 'head' && ur.statusCode === 200) headAnswer(ur.headers);
      res.writeHead(ur.statusCode, ur.headers);
      const ok = ur.statusCode >= 200 && ur.statusCode < 300;
      if (ok && kind === 'create_multipart') {
        let body = '';
        ur.on('data', (d) => { body += d; });
        ur.on('end', () => {
          const m = /<UploadId>([^<]+)<\/UploadId>/.exec(body);
          if (m) uploads.set(m[1], { bucket, key, initiated: new Date().toISOString() });
        });
      }
      if (ok && (kind === 'complete_multipart' || kind === 'abort_multipart')) {
        uploads.delete(u.searchParams.get('uploadId'));
        partBodies.delete(u.searchParams.get('uploadId'));
      }
      if (ok && (wkind === 'put' || wkind === 'complete_multipart')) {
        written.add(slot);
        etags.set(slot, String(ur.headers.etag || '').replace(/"/g, ''));
        sums.set(slot, req.headers['x-amz-checksum-crc32c'] || '');
        bareUntil.delete(slot);
      }
      if (ok && fault === 'kill_after' && faults.kill_pid > 0) {
        // Carried out; the writer dies before the answer reaches it.
        try { process.kill(faults.kill_pid, 'SIGKILL'); } catch (e) { /* gone */ }
        ur.resume();
        ur.on('end', () => res.socket && res.socket.destroy());
        return;
      }
      if (ok && wkind === 'delete') {
        written.delete(slot);
        etags.delete(slot);
      }
      if (fault === 'lost_reply') {
        // Carried out; the answer never arrives.
        ur.resume();
        ur.on('end', () => res.socket && res.socket.destroy());
        return;
      }
      if (fault === 'truncate') {
        // Send part of the body, then cut the connection.
        let sent = 0;
        const len = Number(ur.headers['content-length'] || 0);
        ur.on('data', (d) => {
          if (sent >= len / 2) return;
          res.write(d.subarray(0, Math.max(1, Math.floor(len / 2) - sent)));
          sent += d.length;
          if (sent >= len / 2) res.socket.destroy();
        });
        ur.on('end', () => res.socket && res.socket.destroy());
        return;
      }
      ur.pipe(res);
    });
    up.on('error', () => { res.socket && res.socket.destroy(); });
    if (body) up.end(body); else req.pipe(up);
    }
  });
  proxy.keepAliveTimeout = 30000;
  proxy.on('connection', () => { connections++; });
  proxy.listen(Number(arg('port', '0')), '127.0.0.1', () => {
    const { port } = proxy.address();
    const scheme = tlsCert ? 'https' : 'http';
    process.stdout.write(JSON.stringify({ endpoint: `${scheme}://127.0.0.1:${port}`,
                                          s3_endpoint: `http://127.0.0.1:${s3port}` }) + '\n');
  });
  const stop = async () => {
    proxy.close();
    await server.close();
    process.exit(0);
  };
  if (process.argv.includes('--foreground')) {
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  } else {
    process.stdin.resume();
    process.stdin.on('end', stop);
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
