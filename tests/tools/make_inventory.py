#!/usr/bin/env python3
"""Make an S3 Inventory report of a bucket, in AWS's CSV format, and put
it in another bucket, as S3 delivers one:

    make_inventory.py ENDPOINT SOURCE_BUCKET DEST_BUCKET [--files N]
                      [--extra-rows] [--format CSV]

DEST_BUCKET gets SOURCE_BUCKET/config/2026-12-05T00-00Z/manifest.json and
its gzip'd CSV files (data/*.csv.gz). Rows are in no order and spread
over --files files; keys are URL-encoded as in AWS's reports. The schema
is Bucket, Key, Size, LastModifiedDate, ETag, StorageClass,
IsDeleteMarker. --extra-rows adds a delete marker and a row of another
bucket, which a reader must skip. --format writes that fileFormat into
the manifest (to test a refusal). Prints the manifest's s3:// URL.
Credentials come from the environment (AWS_ACCESS_KEY_ID, ...).
"""
import argparse
import csv
import gzip
import hashlib
import io
import json
import random
import urllib.parse

import boto3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("source")
    ap.add_argument("dest")
    ap.add_argument("--files", type=int, default=3)
    ap.add_argument("--extra-rows", action="store_true")
    ap.add_argument("--format", default="CSV")
    ap.add_argument("--ca", default=None)
    a = ap.parse_args()
    s3 = boto3.client("s3", endpoint_url=a.endpoint, verify=a.ca)
    rows = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=a.source):
        for o in page.get("Contents", []):
            rows.append([a.source, urllib.parse.quote_plus(o["Key"], safe="/"),
                         str(o["Size"]),
                         o["LastModified"].strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                         o["ETag"].strip('"'), "STANDARD", "false"])
    if a.extra_rows and rows:
        rows.append([a.source, rows[0][1] + "-deleted", "0",
                     rows[0][3], "", "STANDARD", "true"])
        rows.append(["some-other-bucket", rows[0][1], "1", rows[0][3],
                     "d41d8cd98f00b204e9800998ecf8427e", "STANDARD", "false"])
    random.Random(7).shuffle(rows)
    base = "%s/config/2026-12-05T00-00Z" % a.source
    files = []
    for i in range(a.files):
        part = rows[i::a.files]
        text = io.StringIO()
        csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n") \
            .writerows(part)
        body = gzip.compress(text.getvalue().encode())
        key = "%s/data/part-%d.csv.gz" % (a.source, i)
        s3.put_object(Bucket=a.dest, Key=key, Body=body)
        files.append({"key": key, "size": len(body),
                      "MD5checksum": hashlib.md5(body).hexdigest()})
    manifest = {
        "sourceBucket": a.source,
        "destinationBucket": "arn:aws:s3:::" + a.dest,
        "version": "2016-11-30",
        "creationTimestamp": "1764892800000",
        "fileFormat": a.format,
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag, "
                      "StorageClass, IsDeleteMarker",
        "files": files,
    }
    s3.put_object(Bucket=a.dest, Key=base + "/manifest.json",
                  Body=json.dumps(manifest, indent=2).encode())
    print("s3://%s/%s/manifest.json" % (a.dest, base))


if __name__ == "__main__":
    main()
