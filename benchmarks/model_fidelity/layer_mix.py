"""Count, per Keras application model, the work of its compute-bound layers (convolution and
dense multiply-accumulates) and the memory traffic of its memory-bound layers (batch norm,
activations, residual adds, pooling, concatenation), and print the `LAYER_MIX` table that
mpijob/perf/perfdata.py carries.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/model_fidelity/layer_mix.py

Memory-bound layers do a handful of operations per element they touch, so their time is the
bytes they move over the GPU's memory bandwidth. Elements touched per output element, forward
plus backward, as separate (unfused) kernels run them:
- BatchNormalization in training: forward reads x twice (statistics, then normalise) and
  writes y (3); backward reads x and dy for the two reductions, again to form dx, writes dx (5).
- ReLU (an Activation layer, or a Conv2D/Dense's own activation): forward reads x, writes y
  (2); backward reads y and dy, writes dx (3).
- A Conv2D/Dense bias: forward read + write (2); backward reduces dy (1).
- Add: forward reads each input and writes the sum; its gradient is dy itself (inputs + 1).
- Max/average pooling: forward reads the input, writes the output; backward reads dy (and,
  for max, x and y) and writes a gradient the size of the input (2 x input + 2 x output).
- Concatenate: a copy each way (2 forward, 2 backward).
The counts are per image and per element; bytes are elements x 4 (fp32) or x 2 (fp16).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
MODELS = {
    "vgg16": ("VGG16", 224), "vgg19": ("VGG19", 224), "resnet50": ("ResNet50", 224),
    "resnet101": ("ResNet101", 224), "resnet152": ("ResNet152", 224),
    "inception3": ("InceptionV3", 299),
}


def _size(shape) -> int:
    n = 1
    for d in shape[1:]:
        n *= int(d)
    return n


def _shapes(tensor) -> list:
    return tensor if isinstance(tensor, list) else [tensor]


def count(model) -> tuple[int, int]:
    """(forward MACs of conv and dense layers, memory-bound elements touched fwd + bwd)."""
    macs = touched = 0
    for layer in model.layers:
        cls = type(layer).__name__
        out = _size(layer.output.shape)
        ins = sum(_size(t.shape) for t in _shapes(layer.input)) if cls != "InputLayer" else 0
        if cls == "Conv2D":
            kh, kw = layer.kernel_size
            macs += out * kh * kw * int(layer.input.shape[-1])
        elif cls == "Dense":
            macs += int(layer.input.shape[-1]) * layer.units
        if cls in ("Conv2D", "Dense"):
            if layer.use_bias:
                touched += 3 * out
            if getattr(layer.activation, "__name__", "") == "relu":
                touched += 5 * out
        elif cls == "BatchNormalization":
            touched += 8 * out
        elif cls in ("Activation", "ReLU"):
            touched += 5 * out
        elif cls == "Add":
            touched += ins + out + out
        elif cls in ("MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D"):
            touched += 3 * ins + 3 * out
        elif cls == "Concatenate":
            touched += 4 * out
    return macs, touched


def main() -> None:
    import tensorflow as tf

    for key, (name, size) in MODELS.items():
        model = getattr(tf.keras.applications, name)(weights=None, input_shape=(size, size, 3))
        macs, touched = count(model)
        print(f'    "{key}": LayerMix(gmacs={macs / 1e9:.2f}, '
              f'memory_bound_melems={touched / 1e6:.1f}),')
        tf.keras.backend.clear_session()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
