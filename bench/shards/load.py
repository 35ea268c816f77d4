"""One rank's epoch of one Python tool over data on S3 (MinIO), in batches, with the decode and augmentation of
common.decode (PIL to RGB, RandomResizedCrop, flip, ToImage/ToDtype, ImageNet normalization) in a DataLoader's
--workers worker processes (0: in this process, as the DataLoader does with num_workers=0). bench/shards/run.sh
starts all the ranks of a simulated job at once (nodes x ranks per node), each with the environment the libraries
read (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GLOBAL_RANK, NODE_RANK, NNODES, MASTER_ADDR/PORT) and its
node's cache directory, and measures each from outside with measure.py.

usage: load.py TOOL URL --cache DIR [--workers N] [--batch 64] [--size 64] [--classes a,b,...] [--start-barrier DIR]

  litdata     litdata.StreamingDataset(URL, cache_dir=DIR, shuffle=True, storage_options: the endpoint and keys)
              through litdata.StreamingDataLoader; its ranks from WORLD_SIZE, GLOBAL_RANK and NNODES (its nodes:
              ranks per node = WORLD_SIZE / NNODES, a rank's node = GLOBAL_RANK / that), no process group.
  mosaic      streaming.StreamingDataset(remote=URL, local=DIR, shuffle=True (its default py1e), batch_size)
              through torch's DataLoader; the endpoint from S3_ENDPOINT_URL. Its ranks on one node share the
              local cache through shared memory and need a process group to agree on it (gloo on loopback,
              started before the clock); its nodes = WORLD_SIZE / LOCAL_WORLD_SIZE, from RANK and LOCAL_RANK.
  webdataset  webdataset.WebDataset over `pipe:s5cmd cat s3://...` of each tar shard (listed first), with
              shardshuffle=100, nodesplitter=split_by_node (RANK, WORLD_SIZE), workersplitter=split_by_worker,
              a .shuffle(N) sample buffer (--shuffle-buffer), through torch's DataLoader. No cache: DIR stays empty.
  s3torch     s3torchconnector.S3MapDataset.from_prefix over the unpacked images (one GET per image, path-style
              addressing for MinIO), the class from the key's folder (--classes, sorted), a DistributedSampler
              (shuffle=True) per rank, through torch's DataLoader. No cache: DIR stays empty.
--start-barrier DIR: after the imports (and Mosaic's process group), this rank's file DIR/ready-RANK, then a wait
for all WORLD_SIZE ranks' before the clock starts, so that the ranks of a job start it together (as tp-bench-data's
--start-barrier).
Prints one JSON line: loader, rank, world_size, node, local_rank, workers, images, seconds (the epoch, from before the dataset is
made, as tp-bench-data times it), first_batch_s (from the same start), cpu_seconds (this process and its reaped
workers over that time), import_s, labels (the smallest and largest class index seen).
"""
import argparse
import json
import os
import sys
import time

import_start = time.perf_counter()
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SIZE = 64


def decode_sample(jpeg, label):
    return common.decode(jpeg, SIZE), int(label)


def litdata_loader(args):
    import litdata
    common.litdata_allow_http()  # before the DataLoader forks its workers, which fetch the chunks

    class Images(litdata.StreamingDataset):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return decode_sample(sample["image"], sample["label"])

    dataset = Images(args.url, cache_dir=args.cache, shuffle=True, storage_options=common.boto3_options())
    return litdata.StreamingDataLoader(dataset, batch_size=args.batch, num_workers=args.workers)


def mosaic_loader(args):
    import streaming

    class Images(streaming.StreamingDataset):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return decode_sample(sample["image"], sample["label"])

    dataset = Images(remote=args.url, local=args.cache, shuffle=True, batch_size=args.batch)
    return DataLoader(dataset, batch_size=args.batch, num_workers=args.workers)


def webdataset_loader(args):
    import shutil

    import boto3
    import webdataset as wds
    bucket, prefix = common.split_s3(args.url)
    client = boto3.client("s3", **common.boto3_options())
    names = sorted(o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
                   for o in page.get("Contents", []) if o["Key"].endswith(".tar"))
    s5cmd = shutil.which("s5cmd")
    assert s5cmd and names, (s5cmd, names)
    urls = [f"pipe:{s5cmd} --log error --endpoint-url {common.endpoint()} cat s3://{bucket}/{name}" for name in names]
    dataset = (wds.WebDataset(urls, shardshuffle=100, nodesplitter=wds.split_by_node,
                              workersplitter=wds.split_by_worker)
               .shuffle(args.shuffle_buffer).to_tuple("jpg", "cls").map(lambda sample: decode_sample(*sample)))
    return DataLoader(dataset, batch_size=args.batch, num_workers=args.workers)


def s3torch_loader(args):
    from s3torchconnector import S3ClientConfig, S3MapDataset
    from torch.utils.data.distributed import DistributedSampler
    classes = {name: index for index, name in enumerate(sorted(args.classes.split(",")))}

    def load(reader):
        return decode_sample(reader.read(), classes[reader.key.rsplit("/", 2)[-2]])

    dataset = S3MapDataset.from_prefix(args.url.rstrip("/") + "/", region="us-east-1", endpoint=common.endpoint(),
                                       transform=load, s3client_config=S3ClientConfig(force_path_style=True))
    sampler = DistributedSampler(dataset, num_replicas=int(os.environ["WORLD_SIZE"]), rank=int(os.environ["RANK"]),
                                 shuffle=True)
    return DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers)


def start_barrier(directory, rank, world_size, timeout=600):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"ready-{rank}"), "w") as file:
        file.write("\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(name.startswith("ready-") for name in os.listdir(directory)) >= world_size:
            return
        time.sleep(0.005)
    raise TimeoutError(f"the other ranks did not reach {directory} within {timeout} s")


def main():
    global SIZE
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=["litdata", "mosaic", "webdataset", "s3torch"])
    parser.add_argument("url")
    parser.add_argument("--cache", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--shuffle-buffer", type=int, default=1000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--classes", default="")
    parser.add_argument("--start-barrier")
    args = parser.parse_args()
    SIZE = args.size
    common.transform(args.size)  # torchvision.transforms.v2 imported and the transform made: imports
    from PIL import Image  # noqa: F401
    import_s = time.perf_counter() - import_start
    torch.set_num_threads(1)  # the DataLoader's workers are the parallelism, as in bench/data
    os.makedirs(args.cache, exist_ok=True)
    if args.tool == "mosaic":
        torch.distributed.init_process_group("gloo")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from run.sh
    if args.start_barrier:
        start_barrier(args.start_barrier, int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))
    cpu_start = common.cpu_seconds()
    start = time.perf_counter()
    loader = {"litdata": litdata_loader, "mosaic": mosaic_loader, "webdataset": webdataset_loader,
              "s3torch": s3torch_loader}[args.tool](args)
    images = 0
    first_batch = None
    labels = [None, None]
    for inputs, targets in loader:
        if first_batch is None:
            first_batch = time.perf_counter() - start
            assert inputs.shape[1:] == (3, args.size, args.size) and inputs.dtype == torch.float32, inputs.shape
        images += inputs.shape[0]
        low, high = int(targets.min()), int(targets.max())
        labels = [low if labels[0] is None else min(labels[0], low), high if labels[1] is None else max(labels[1], high)]
    seconds = time.perf_counter() - start
    del loader  # joins the workers, so that their CPU time is counted
    cpu = common.cpu_seconds() - cpu_start
    if args.tool == "mosaic":
        torch.distributed.destroy_process_group()
    print(json.dumps({"loader": args.tool, "rank": int(os.environ.get("RANK", 0)),
                      "world_size": int(os.environ.get("WORLD_SIZE", 1)), "node": int(os.environ.get("NODE_RANK", 0)),
                      "local_rank": int(os.environ.get("LOCAL_RANK", 0)), "workers": args.workers, "images": images,
                      "seconds": round(seconds, 3), "first_batch_s": round(first_batch or 0, 3),
                      "cpu_seconds": round(cpu, 3), "import_s": round(import_s, 3), "labels": labels}), flush=True)


if __name__ == "__main__":
    main()
