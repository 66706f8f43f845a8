"""A PyTorch training loop as a worker of a parameter-server job.

    import ps, ps.pytorch
    model = Net()
    worker = ps.pytorch.ModelWorker(client, model, job={"job_id": "cnn", ...}, worker=i,
                                    num_workers=n)
    for x, y in batches:
        worker.pull()                  # The job's values, written into model's parameters.
        model.zero_grad()
        loss_fn(model(x), y).backward()
        worker.push()                  # The parameters' gradients to the shards.

The module's named parameters (those that require grad) are the job's variables, by name and
shape; the shards apply the job's optimizer, so the program runs none. The values start as the
shards' initializers make them (Glorot's uniform for matrices and kernels, zeros for biases)
and are the same on every worker from the first pull.
"""
import numpy as np
import torch

import ps


def _check_cpu_float32(name, tensor, what):
    if tensor.device.type != "cpu":
        raise ValueError(f"{what} {name} is on {tensor.device}; a worker's parameters and "
                         "gradients cross as CPU memory: keep the model on the CPU, or copy "
                         "to a CPU model before pull and push")
    if tensor.dtype != torch.float32:
        raise TypeError(f"{what} {name} is {tensor.dtype}; the job's variables are float32: "
                        "model.float()")


class ModelWorker:
    """Pulls the job's values into a module's parameters and pushes their gradients."""

    def __init__(self, client, model, job, worker, num_workers, incarnation=0, first_step=0):
        self.model = model
        self._parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        if not self._parameters:
            raise ValueError("the model has no parameters that require grad")
        for name, p in self._parameters:
            _check_cpu_float32(name, p, "parameter")
            if not p.is_contiguous():
                raise ValueError(f"parameter {name} is not contiguous")
        self.job = ps.Job(job, {name: tuple(p.shape) for name, p in self._parameters},
                          num_workers)
        self.worker = ps.Worker(client, self.job, worker, incarnation, first_step=first_step)
        for name, p in self._parameters:
            if self.worker.variables[name] != (tuple(p.shape) or (1,)):
                raise ValueError(f"parameter {name} has shape {tuple(p.shape)}, the job's "
                                 f"variable {self.worker.variables[name]}")
        # Views of the parameters' memory: a pull writes into the model without a copy.
        self._views = {name: p.detach().numpy().reshape(self.worker.variables[name])
                       for name, p in self._parameters}
        self._zeros = {}

    @classmethod
    def from_environment(cls, model):
        """The worker of the program job ps_worker started this process for (ps.from_environment):
        the job's JobSpec, this worker's index, incarnation and first step."""
        task = ps.from_environment()
        return cls(task.client, model, task.job, task.worker, task.num_workers,
                   task.incarnation, task.first_step)

    def pull(self):
        """Writes the job's values into the model's parameters (waiting as the mode says)."""
        self.worker.pull(self._views)

    def pull_latest(self):
        """The values the shards hold now into the model, waiting for nothing (the final model
        once every worker has left)."""
        self.worker.pull_latest(self._views)

    def push(self):
        """Sends each parameter's .grad (zeros where backward left none); returns each shard's
        answer."""
        return self.worker.push(self._gradients())

    def push_pull(self):
        """push(), then the next step's values into the parameters, in one round trip per
        shard (the next step needs no pull()); returns push()'s answers."""
        return self.worker.push_pull(self._gradients(), self._views)

    def _gradients(self):
        gradients = {}
        for name, p in self._parameters:
            grad = p.grad
            if grad is None:
                grad = self._zeros.setdefault(name, torch.zeros_like(p))
            _check_cpu_float32(name, grad, "the gradient of")
            if grad.is_sparse:
                raise ValueError(f"the gradient of {name} is sparse; sparse embeddings go to "
                                 "the job's sparse tables (not yet through ps.pytorch)")
            gradients[name] = grad.detach().contiguous().numpy().reshape(
                self.worker.variables[name])
        return gradients

    def leave(self):
        self.worker.leave()

    def progress(self):
        """ps.Worker.progress(): steps, the job's step and the mean staleness, for ps.report."""
        return self.worker.progress()

    @property
    def local_step(self):
        return self.worker.local_step
