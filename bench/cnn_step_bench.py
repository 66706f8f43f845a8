"""PyTorch's CPU step for the network of a CNN job file, beside bench/cnn_step_bench.cc.

The network is the job's (convolutions, poolings, dense layers, the output layer over
--classes), built from the same JSON; a step is the forward pass over a batch, the mean softmax
cross-entropy and backward() (every parameter's gradient), with no optimizer (the native
worker's update is the ps's). Prints one JSON line like cnn_step_bench's.

  python3 bench/cnn_step_bench.py --job=config/jobs/fashion_mnist_cnn.json --batch_size=64
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn

ACTIVATIONS = {"RELU": nn.ReLU, "TANH": nn.Tanh, "SIGMOID": nn.Sigmoid}


def build(model, classes):
    """The job's ModelSpec (kind CNN) as an nn.Sequential over NCHW images."""
    image = model["image"]
    channels, height, width = image["channels"], image["height"], image["width"]
    layers, flat = [], False
    for layer in model["layers"]:
        kind, kernel = layer["kind"], layer.get("kernel", 0)
        stride, padding = layer.get("stride", 0), layer.get("padding", 0)
        if kind == "CONV":
            stride = stride or 1
            layers.append(nn.Conv2d(channels, layer["filters"], kernel, stride, padding))
            channels = layer["filters"]
        elif kind in ("MAX_POOL", "AVG_POOL"):
            stride = stride or kernel
            pool = nn.MaxPool2d if kind == "MAX_POOL" else nn.AvgPool2d
            layers.append(pool(kernel, stride, padding))
        elif kind == "DENSE":
            if not flat:
                layers.append(nn.Flatten())
                flat, channels = True, channels * height * width
            layers.append(nn.Linear(channels, layer["units"]))
            channels = layer["units"]
        elif kind == "DROPOUT":
            layers.append(nn.Dropout(layer.get("rate", 0.0)))
        else:
            raise SystemExit(f"{kind}: not a layer this bench builds")
        if kind in ("CONV", "MAX_POOL", "AVG_POOL"):
            height = (height + 2 * padding - kernel) // stride + 1
            width = (width + 2 * padding - kernel) // stride + 1
        if kind in ("CONV", "DENSE"):
            layers.append(ACTIVATIONS[layer.get("activation", "RELU")]())
    if not flat:
        layers.append(nn.Flatten())
        channels = channels * height * width
    layers.append(nn.Linear(channels, classes))
    return nn.Sequential(*layers), model["image"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", default="config/jobs/fashion_mnist_cnn.json")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    with open(args.job) as f:
        network, image = build(json.load(f)["model"], args.classes)
    features = torch.rand(args.batch_size, image["channels"], image["height"], image["width"])
    labels = torch.arange(args.batch_size) % args.classes
    loss_fn = nn.CrossEntropyLoss()

    def step():
        network.zero_grad(set_to_none=False)
        loss_fn(network(features), labels).backward()

    for _ in range(args.warmup):
        step()
    rates = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.steps * args.batch_size / (time.perf_counter() - start))
    print(json.dumps({"examples_per_second": round(statistics.median(rates), 1)}))


if __name__ == "__main__":
    main()
