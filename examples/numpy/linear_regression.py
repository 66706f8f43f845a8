"""A NumPy-only worker (no PyTorch): linear regression y = x·w + b on synthetic data, the
gradient written by hand, through ps.Worker. As a program job's worker (JobSpec.program) it
takes its task from ps_worker (ps.from_environment); train() runs it on any client.

    psctl local --job=config/jobs/numpy_linear.json
"""
import numpy as np

import ps

FEATURES = 8


def data(seed, examples=4000):
    """Synthetic rows and targets of a hidden linear model (its weights returned too)."""
    rng = np.random.default_rng(seed)
    true_w = rng.normal(size=(FEATURES, 1)).astype(np.float32)
    x = rng.normal(size=(examples, FEATURES)).astype(np.float32)
    y = x @ true_w + 0.5 + 0.01 * rng.normal(size=(examples, 1)).astype(np.float32)
    return x, y, true_w


def train(client, job, worker_index, num_workers, incarnation=0, first_step=0):
    """Runs job["steps"] steps of this worker's shard; returns (its last loss, the worker)."""
    worker = ps.Worker(client, ps.Job(job, {"w": (FEATURES, 1), "b": (1,)}, num_workers),
                       worker_index, incarnation, first_step=first_step)
    x, y, _ = data(int(job.get("seed", 0)))
    x, y = x[worker_index::num_workers], y[worker_index::num_workers]
    batch = int(job.get("batch_size", 32))
    values, loss = worker.zeros(), float("nan")
    for step in range(first_step, int(job.get("steps", 100))):
        worker.pull(values)
        rows = np.arange(step * batch, (step + 1) * batch) % len(x)
        error = x[rows] @ values["w"] + values["b"] - y[rows]
        loss = float(np.mean(error ** 2))
        gradients = {"w": (2 / batch * x[rows].T @ error).astype(np.float32),
                     "b": np.array([2 * np.mean(error)], np.float32)}
        worker.push(gradients)
        ps.report(**worker.progress(), loss=loss)
    worker.leave()
    return loss, worker


if __name__ == "__main__":
    task = ps.from_environment()
    train(task.client, task.job, task.worker, task.num_workers, task.incarnation,
          task.first_step)
