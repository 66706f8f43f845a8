"""A convolutional network on Fashion-MNIST as a program job's worker (JobSpec.program), or
alone (--single) as the single-process PyTorch reference of the same budget.

The data are the real 70,000 images of Debian's dataset-fashion-mnist (IDX files, read from
their .gz directly): 60,000 for training, 10,000 for the test, which is evaluated on the final
model only, after every worker has pushed its last gradient (the model psctl saves in params/).
Every worker trains on its shard of each epoch's shuffled order (the job's seed), so the N
workers of a SYNC step see the batch a single process would take in N pieces.

    psctl local --job=config/jobs/pytorch_fashion_mnist.json --workers=4
    tools/ps_python examples/pytorch/fashion_mnist_cnn.py --single --job=config/jobs/...json
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, split):
    images = read_idx(f"{data_dir}/{split}-images-idx3-ubyte.gz")
    labels = read_idx(f"{data_dir}/{split}-labels-idx1-ubyte.gz")
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def network():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def evaluate(model, x, y):
    with torch.no_grad():
        losses, right = [], 0
        for at in range(0, len(x), 1000):
            logits = model(x[at:at + 1000])
            losses.append(float(torch.nn.functional.cross_entropy(logits, y[at:at + 1000],
                                                                  reduction="sum")))
            right += int((logits.argmax(1) == y[at:at + 1000]).sum())
    return {"loss": sum(losses) / len(x), "accuracy": right / len(x), "examples": len(x)}


def batches(job, num_workers, worker, first_step, train_size):
    """(step, epoch, rows) of this worker: each epoch a permutation of the training set (the
    job's seed and the epoch), the step's num_workers * batch_size rows dealt worker by worker."""
    batch = int(job.get("batch_size", 32))
    per_step = batch * num_workers
    steps_per_epoch = train_size // per_step
    total = int(job.get("epochs", 1)) * steps_per_epoch
    order, order_epoch = None, -1
    for step in range(first_step, total):
        epoch = step // steps_per_epoch
        if epoch != order_epoch:
            order_epoch = epoch
            order = torch.randperm(
                train_size, generator=torch.Generator().manual_seed(int(job["seed"]) + epoch))
        at = (step % steps_per_epoch) * per_step + worker * batch
        yield step, epoch, order[at:at + batch]


def single(job, data_dir, workers):
    """The reference: one process, PyTorch's own SGD with the job's optimizer, on batches of
    the same total size in the same order."""
    torch.manual_seed(int(job["seed"]))
    x, y = load(data_dir, "train")
    test_x, test_y = load(data_dir, "t10k")
    model = network()
    optimizer = job.get("optimizer", {})
    sgd = torch.optim.SGD(model.parameters(), lr=float(job["learning_rate"]["base"]),
                          momentum=float(optimizer.get("momentum", 0.9))
                          if optimizer.get("kind") == "MOMENTUM" else 0.0)
    big = dict(job, batch_size=int(job.get("batch_size", 32)) * workers)
    start = time.time()
    for step, epoch, rows in batches(big, 1, 0, 0, len(x)):
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
        sgd.step()
    result = evaluate(model, test_x, test_y)
    result["seconds"] = time.time() - start
    print(json.dumps(result))


def worker_main(data_dir):
    import ps
    import ps.pytorch
    task = ps.from_environment()
    job = task.job
    torch.manual_seed(int(job.get("seed", 0)))
    x, y = load(data_dir, "train")
    model = network()
    worker = ps.pytorch.ModelWorker(task.client, model, job, task.worker, task.num_workers,
                                    task.incarnation, task.first_step)
    loss_fn = torch.nn.CrossEntropyLoss()
    start, done = time.time(), 0
    for step, epoch, rows in batches(job, task.num_workers, task.worker, task.first_step, len(x)):
        worker.pull()
        model.zero_grad()
        loss = loss_fn(model(x[rows]), y[rows])
        loss.backward()
        worker.push()
        done += len(rows)
        ps.report(**worker.progress(), epoch=epoch, loss=float(loss),
                  examples_per_second=done / max(time.time() - start, 1e-6))
    last_step = worker.local_step
    worker.leave()
    if task.worker != 0:
        return
    # The chief evaluates the final model: once every worker has left, the shards hold the
    # values psctl saves, which it pulls as they are.
    deadline = time.time() + 600
    while time.time() < deadline:
        stats = task.client.job_stats(job["job_id"])
        if all(w.get("left") for shard in stats for w in shard.get("workers", [])):
            break
        time.sleep(0.2)
    worker.pull_latest()
    test_x, test_y = load(data_dir, "t10k")
    result = evaluate(model, test_x, test_y)
    ps.report(**worker.progress(), eval=dict(result, step=last_step))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data_dir", default=DATA)
    parser.add_argument("--single", action="store_true",
                        help="train alone with PyTorch's SGD (the reference) and print JSON")
    parser.add_argument("--job", help="with --single: the job file whose settings to use")
    parser.add_argument("--workers", type=int, default=4,
                        help="with --single: the workers whose batches one step takes")
    args, _ = parser.parse_known_args()
    if args.single:
        with open(args.job) as f:
            single(json.load(f), args.data_dir, args.workers)
    else:
        worker_main(args.data_dir)
