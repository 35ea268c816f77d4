"""What bench/shards' packers and loaders share: the image folder's samples, the S3 endpoint and keys, the decode
and augmentation every loader applies, and the CPU time of a process with its reaped children."""
import io
import os
import random
import resource

# The ImageNet statistics trainpoint's data.normalize = "imagenet" uses (runtime/data), as bench/data does.
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def list_samples(folder, seed=42):
    """The image folder's samples as (path, class index), classes in sorted order (torchvision's ImageFolder
    rule), files sorted within a class, then put in one seeded order, as `trainpoint pack` puts them, so that
    every shard holds every class."""
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    samples = []
    for index, name in enumerate(classes):
        directory = os.path.join(folder, name)
        for file in sorted(os.listdir(directory)):
            if file.lower().endswith((".jpg", ".jpeg")):
                samples.append((os.path.join(directory, file), index))
    random.Random(seed).shuffle(samples)
    return classes, samples


def read(path):
    with open(path, "rb") as file:
        return file.read()


def split_s3(url):
    """s3://bucket/prefix -> (bucket, prefix without a trailing slash)."""
    assert url.startswith("s3://"), url
    bucket, _, prefix = url[len("s3://"):].partition("/")
    return bucket, prefix.rstrip("/")


def endpoint():
    return os.environ["AWS_ENDPOINT_URL"]


def boto3_options():
    """The keyword arguments of boto3's client for MinIO on loopback (LitData's storage_options)."""
    return {"endpoint_url": endpoint(), "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"], "region_name": "us-east-1"}


def litdata_allow_http():
    """LitData moves chunks with obstore, which refuses an http:// endpoint (MinIO on loopback) unless its
    client options say allow_http, and LitData passes obstore client options of its own with no way to add
    one (obstore then ignores AWS_ALLOW_HTTP). Adds it to them, so that LitData takes the same path as against
    https:// S3 rather than its boto3 fallback."""
    from litdata.streaming import downloader
    downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": "true"}


def cpu_seconds():
    """User + system seconds of this process and of its children that have ended and been reaped (the
    DataLoader's workers once the loader is gone, and what they reaped in turn)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


_transform = None


def transform(size):
    """The augmentation, made once per process: torchvision.transforms.v2 RandomResizedCrop(size) +
    RandomHorizontalFlip (on the PIL image, as torchvision's ImageFolder pipelines do) + ToImage/ToDtype
    (ToTensor's [0, 1] floats) + Normalize (ImageNet), as tp-bench-data --size does with data.augment =
    ["random_resized_crop", "flip"], normalize = "imagenet". load.py makes it before its clock starts, so that the
    DataLoader's forked workers inherit it, imports done."""
    global _transform
    if _transform is None:
        import torch
        from torchvision.transforms import v2
        _transform = v2.Compose([
            v2.RandomResizedCrop(size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ])
    return _transform


def decode(jpeg, size):
    """The one decode and augmentation of every Python loader: PIL decodes the JPEG's bytes to RGB, then
    transform(size)."""
    from PIL import Image
    with Image.open(io.BytesIO(jpeg)) as image:
        return transform(size)(image.convert("RGB"))
