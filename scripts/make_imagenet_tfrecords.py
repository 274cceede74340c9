#!/usr/bin/env python3
"""Write a small ImageNet-layout TFRecord set: random JPEGs at a few sizes, in the format
inception's build_imagenet_data.py writes and tf_cnn_benchmarks reads (`train-NNNNN-of-
NNNNN` files of tf.train.Example records with image/encoded, image/class/label 1..1000,
image/object/bbox/{xmin,ymin,xmax,ymax} and the rest of that script's features).

Tests and the CPU quickstart run the benchmark's real input pipeline on it:

    python scripts/make_imagenet_tfrecords.py /tmp/imagenet-mini
    hvdk8s submit mpi --backend local --workers 2 --gpus 0 --data-name imagenet \\
        --benchmark-data-dir /tmp/imagenet-mini --image-size 64 --batch-size 8 --wait

Deterministic for a seed: the same records every time. Labels are 1 + the record's index
modulo 1000, so no two records of a set of up to 1000 share one (a test can tell which
shard a rank read from its labels).
"""

from __future__ import annotations

import argparse
import os
import sys

# (height, width): ImageNet's photos vary in size and aspect; a few shapes make the crop
# and resize do real work without making the set large.
SIZES = ((96, 128), (128, 96), (160, 160), (120, 200))


def _example(tf, np, rng, index: int, height: int, width: int):
    # Smooth noise (a low-resolution random image scaled up) compresses like a photo,
    # where per-pixel noise would make every JPEG several times larger.
    small = rng.integers(0, 256, size=(max(2, height // 8), max(2, width // 8), 3), dtype=np.uint8)
    image = tf.image.resize(small, [height, width], method="bilinear")
    jpeg = tf.io.encode_jpeg(tf.cast(image, tf.uint8), quality=90).numpy()
    label = 1 + index % 1000
    ymin, xmin = rng.uniform(0.0, 0.4, size=2)
    ymax, xmax = ymin + rng.uniform(0.3, 0.6), xmin + rng.uniform(0.3, 0.6)

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def f(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v)]))

    synset = f"n{label:08d}".encode()
    return tf.train.Example(features=tf.train.Features(feature={
        "image/height": i(height), "image/width": i(width),
        "image/colorspace": b(b"RGB"), "image/channels": i(3),
        "image/class/label": i(label), "image/class/synset": b(synset),
        "image/class/text": b(b"synthetic class " + str(label).encode()),
        "image/object/bbox/xmin": f(xmin), "image/object/bbox/ymin": f(ymin),
        "image/object/bbox/xmax": f(min(xmax, 1.0)), "image/object/bbox/ymax": f(min(ymax, 1.0)),
        "image/object/bbox/label": i(label),
        "image/format": b(b"JPEG"), "image/filename": b(f"{synset.decode()}_{index}.JPEG".encode()),
        "image/encoded": b(jpeg),
    }))


def write(out_dir: str, records: int, shards: int, seed: int) -> list[str]:
    import numpy as np
    import tensorflow as tf

    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for shard in range(shards):
        path = os.path.join(out_dir, f"train-{shard:05d}-of-{shards:05d}")
        with tf.io.TFRecordWriter(path) as writer:
            for index in range(shard, records, shards):
                height, width = SIZES[index % len(SIZES)]
                writer.write(_example(tf, np, rng, index, height, width).SerializeToString())
        paths.append(path)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--records", type=int, default=320)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not 1 <= args.shards <= args.records:
        p.error("--shards must be from 1 to --records")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    paths = write(args.out_dir, args.records, args.shards, args.seed)
    size = sum(os.path.getsize(x) for x in paths)
    print(f"{args.records} records in {len(paths)} files ({size / 1e6:.1f} MB) in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
