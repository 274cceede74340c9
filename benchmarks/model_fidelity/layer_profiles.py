"""Count, per Keras application model, each layer's trainable parameters and forward
multiply-accumulates, in backward order, and print the gradient-readiness profile that
mpijob/perf/perfdata.py carries as GRADIENT_PROFILES.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/model_fidelity/layer_profiles.py

A layer's gradient is ready when the backward pass has gone through it; the backward pass
visits layers in reverse order and spends time in proportion to their MACs. Layers are
merged into at most BUCKETS groups of consecutive layers (equal shares of backward time),
each reported as (backward fraction when its last gradient is ready, parameters, tensors).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
BUCKETS = 24
MODELS = {
    "vgg16": ("VGG16", 224), "vgg19": ("VGG19", 224), "resnet50": ("ResNet50", 224),
    "resnet101": ("ResNet101", 224), "resnet152": ("ResNet152", 224),
    "inception3": ("InceptionV3", 299),
}


def layer_rows(model):
    import numpy as np
    rows = []
    for layer in model.layers:
        weights = layer.trainable_weights
        if not weights:
            continue
        params = int(sum(np.prod(w.shape) for w in weights))
        macs = 0
        cls = type(layer).__name__
        if cls == "Conv2D":
            out = layer.output.shape
            kh, kw = layer.kernel_size
            cin = layer.input.shape[-1]
            macs = int(out[1] * out[2] * kh * kw * cin * out[3])
        elif cls == "Dense":
            macs = int(layer.input.shape[-1] * layer.units)
        rows.append((params, macs, len(weights)))
    return rows


def profile(rows):
    rows = rows[::-1]  # backward order
    total_macs = sum(m for _, m, _ in rows) or 1
    out, done, acc_p, acc_t = [], 0, 0, 0
    next_edge = 1 / BUCKETS
    for i, (p, m, t) in enumerate(rows):
        done += m
        acc_p += p
        acc_t += t
        frac = done / total_macs
        last = i == len(rows) - 1
        if frac >= next_edge - 1e-12 or last:
            out.append((round(frac, 4), acc_p, acc_t))
            acc_p = acc_t = 0
            while next_edge <= frac + 1e-12:
                next_edge += 1 / BUCKETS
    return out


def main() -> int:
    import tensorflow as tf
    for key, (name, size) in MODELS.items():
        model = getattr(tf.keras.applications, name)(weights=None, input_shape=(size, size, 3))
        prof = profile(layer_rows(model))
        print(f'    "{key}": (')
        for frac, params, tensors in prof:
            print(f"        ({frac}, {params}, {tensors}),")
        print("    ),")
        tf.keras.backend.clear_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
