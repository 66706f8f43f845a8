"""A PyTorch MLP as a program job's worker (JobSpec.program), on a synthetic 4-class Gaussian
mixture: every worker trains on its shard of the same data (the job's seed), the shards apply
the job's optimizer and consistency mode, and worker 0 evaluates on a held-out set.

Run it with psctl (config/jobs/pytorch_mlp.json), which starts it on every worker:
    psctl local --job=config/jobs/pytorch_mlp.json
"""
import time

import torch

import ps
import ps.pytorch


def mixture(seed, examples, features=16, classes=4):
    generator = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=generator) * 0.4
    labels = torch.randint(0, classes, (examples,), generator=generator)
    points = centers[labels] + torch.randn(examples, features, generator=generator)
    return points, labels


def main():
    torch.set_num_threads(1)
    task = ps.from_environment()
    job = task.job
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    worker = ps.pytorch.ModelWorker(task.client, model, job, task.worker, task.num_workers,
                                    task.incarnation, task.first_step)
    x, y = mixture(int(job.get("seed", 0)), 2400)
    train_x, train_y, test_x, test_y = x[:2000], y[:2000], x[2000:], y[2000:]
    shard = slice(task.worker, None, task.num_workers)  # This worker's examples.
    train_x, train_y = train_x[shard], train_y[shard]
    batch = int(job.get("batch_size", 32))
    steps = int(job.get("steps", 100))
    eval_every = int(job.get("eval_interval", 20)) or steps
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.time()
    for step in range(task.first_step, steps):
        worker.pull()
        rows = [(step * batch + i) % len(train_x) for i in range(batch)]
        model.zero_grad()
        loss = loss_fn(model(train_x[rows]), train_y[rows])
        loss.backward()
        worker.push()
        progress = dict(worker.progress())
        progress.update({"epoch": (step + 1) * batch // len(train_x), "loss": float(loss),
                         "examples_per_second": (step + 1 - task.first_step) * batch /
                                                max(time.time() - start, 1e-6)})
        if task.worker == 0 and ((step + 1) % eval_every == 0 or step + 1 == steps):
            worker.pull()  # The values after this step's update: what the job holds.
            with torch.no_grad():
                logits = model(test_x)
                progress["eval"] = {"step": step + 1, "loss": float(loss_fn(logits, test_y)),
                                    "accuracy": float((logits.argmax(1) == test_y).float().mean()),
                                    "examples": len(test_x)}
        ps.report(**progress)
    worker.leave()


if __name__ == "__main__":
    main()
