"""Packs an image folder into shards on S3 (MinIO) with one of the Python tools, storing each image's JPEG bytes
as they are (no re-encoding) and its class index, in shards of about --shard-mb MiB. bench/shards/run.sh times
it; `trainpoint pack` is its own command there.

usage: pack.py litdata|mosaic|webdataset FOLDER s3://BUCKET/PREFIX --shard-mb MB [--workers N]

  litdata     litdata.optimize(num_workers=N) to output_dir s3://..., its storage_options naming the endpoint
              and keys; each worker writes its own chunks (chunk_bytes) into TMPDIR/chunks and uploads them
              (with obstore) as they close.
  mosaic      streaming.MDSWriter(out="s3://...", size_limit, no compression): one writer (Mosaic has no
              parallel writer, only its recipe of several writers and merge_index); each shard is uploaded
              by the writer's thread pool (max_workers=N) while the next is written. S3_ENDPOINT_URL names the
              endpoint.
  webdataset  webdataset.ShardWriter(maxsize) to "pipe:s5cmd pipe s3://.../train-%06d.tar": each tar streams
              into an s5cmd process that uploads it as it is written (nothing on local disk); one writer,
              WebDataset has no parallel writer.
Prints one JSON line: the tool, the samples, and the seconds and CPU seconds inside Python (after the imports;
run.sh times the whole command).
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

if sys.argv[1:2] == ["litdata"]:  # here and in the processes LitData spawns, which import this file again
    common.litdata_allow_http()


def litdata_sample(item):
    path, label = item
    return {"image": common.read(path), "label": label}


def pack_litdata(samples, url, shard_bytes, workers):
    import litdata
    litdata.optimize(fn=litdata_sample, inputs=samples, output_dir=url, chunk_bytes=shard_bytes,
                     num_workers=workers, storage_options=common.boto3_options(), mode="overwrite",
                     verbose=False)


def pack_mosaic(samples, url, shard_bytes, workers):
    from streaming import MDSWriter
    os.environ.setdefault("S3_ENDPOINT_URL", common.endpoint())
    with MDSWriter(out=url, columns={"image": "bytes", "label": "int"}, size_limit=shard_bytes,
                   max_workers=workers, exist_ok=True) as writer:
        for path, label in samples:
            writer.write({"image": common.read(path), "label": label})


def pack_webdataset(samples, url, shard_bytes, workers):
    import webdataset as wds
    s5cmd = shutil.which("s5cmd")  # run.sh puts scripts/install-go-tools' bin on PATH
    assert s5cmd, "no s5cmd on PATH"
    pattern = f"pipe:{s5cmd} --log error --endpoint-url {common.endpoint()} pipe {url}/train-%06d.tar"
    # maxcount: no limit on samples, only the size.
    with wds.ShardWriter(pattern, maxsize=shard_bytes, maxcount=10**9, verbose=0) as writer:
        for i, (path, label) in enumerate(samples):
            writer.write({"__key__": f"s{i:09d}", "jpg": common.read(path), "cls": label})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=["litdata", "mosaic", "webdataset"])
    parser.add_argument("folder")
    parser.add_argument("url")
    parser.add_argument("--shard-mb", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    cpu_start = common.cpu_seconds()
    _, samples = common.list_samples(args.folder)
    pack = {"litdata": pack_litdata, "mosaic": pack_mosaic, "webdataset": pack_webdataset}[args.tool]
    pack(samples, args.url.rstrip("/"), args.shard_mb << 20, args.workers)
    print(json.dumps({"tool": args.tool, "samples": len(samples), "python_seconds": round(time.perf_counter() - start, 3),
                      "python_cpu_seconds": round(common.cpu_seconds() - cpu_start, 3)}), flush=True)


if __name__ == "__main__":
    main()
