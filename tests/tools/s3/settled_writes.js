// s3rver 3.7.1 answers a PUT (and an UploadPart) before the body is on
// disk: its store resolves on the 'finish' of the MD5 transform, while the
// file stream behind it may still be writing. The object's metadata (with
// its ETag) is then stored, so a listing or a GET in that moment sees the
// final ETag with a short or empty file. Real S3 never shows an object
// before all of it is stored, so a test run against that moment fails for
// the server's sake: a continuous copy once listed a new object at 0 bytes.
//
// This module replaces the store's putObject and putPart with ones that
// answer only once the bytes are written, each to a new file renamed into
// place (a reader sees the old object or the new one, never part of one).
// Everything else of s3rver is as it ships.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Readable, Transform } = require('stream');
const { pipeline } = require('stream/promises');
const FilesystemStore = require('s3rver/lib/stores/filesystem');

let serial = 0;

// Write content (a Buffer or a stream) to dest by way of a temporary file
// beside it; resolves to [size, md5 hex] once the file is renamed in.
async function writeSettled(dest, content) {
  await fs.promises.mkdir(path.dirname(dest), { recursive: true });
  const tmp = `${dest}.${process.pid}.${++serial}.tmp`;
  const md5 = crypto.createHash('md5');
  let size = 0;
  const count = new Transform({
    transform(chunk, encoding, callback) {
      md5.update(chunk);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  const source = Buffer.isBuffer(content) ? Readable.from([content]) : content;
  try {
    await pipeline(source, count, fs.createWriteStream(tmp));
    await fs.promises.rename(tmp, dest);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true });
    throw err;
  }
  return [size, md5.digest('hex')];
}

FilesystemStore.prototype.putObject = async function putObject(object) {
  const dest = this.getResourcePath(object.bucket, object.key, 'object');
  const [size, md5] = await writeSettled(dest, object.content);
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size, md5 };
};

FilesystemStore.prototype.putPart = async function putPart(
  bucket, uploadId, partNumber, content) {
  const dest = path.join(this.getResourcePath(bucket, undefined, 'uploads'),
                         uploadId, partNumber.toString());
  const [size, md5] = await writeSettled(dest, content);
  await fs.promises.writeFile(`${dest}.md5`, md5);
  return { size, md5 };
};
