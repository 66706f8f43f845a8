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
shape; the shards apply the job's optimizer, so the program runs none. Embeddings are sparse
tables on the shards: an nn.Embedding or nn.EmbeddingBag made with sparse=True (the table named
as the module is in the model, its weight holding the rows the step pulled), or a
SparseEmbeddingBag, which holds nothing but those rows (for tables too large for a worker). A
step pulls and pushes only the rows of the keys its batch uses (pull(keys={name: keys})).
The dense values start as the chief's model: worker 0 creates the job with its parameters'
values (PyTorch's own initialization; seed it with torch.manual_seed for a repeatable run) and
every worker's first pull returns them. With init="shards" they start as the shards'
initializers make them (Glorot's uniform for matrices and kernels, zeros for biases). Either way
every worker starts from the same values. Sparse tables' rows start at the shards' initializer.
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


class SparseEmbeddingBag(torch.nn.Module):
    """nn.EmbeddingBag whose table lives on the parameter servers as sparse table `table`
    (rows of `dim` floats by 64-bit key, any key, made on first touch): it holds only the rows
    of the keys ModelWorker.pull(keys={table: ...}) fetched for the step, and their gradients
    go back as the table's rows. forward(input, offsets) as nn.EmbeddingBag's (1-D input of
    keys, offsets of each bag), mode "sum" or "mean"."""

    def __init__(self, table, dim, mode="sum"):
        super().__init__()
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode {mode!r}: use 'sum' or 'mean'")
        self.table, self.dim, self.mode = table, int(dim), mode
        self.keys = torch.zeros(0, dtype=torch.int64)   # Sorted, distinct: the rows held.
        self.rows = torch.zeros(0, self.dim, requires_grad=True)

    def hold(self, keys, rows):
        """The rows of `keys` (sorted, distinct), as pulled: a leaf the backward fills."""
        self.keys = torch.from_numpy(keys.astype(np.int64))
        self.rows = torch.from_numpy(rows).requires_grad_()

    def gradient(self):
        """(keys, rows' gradients) of the rows held, or None before a backward."""
        if self.rows.grad is None or not len(self.keys):
            return None
        return self.keys.numpy().astype(np.uint64), self.rows.grad.detach().contiguous().numpy()

    def forward(self, input, offsets=None):
        if len(self.keys) == 0:
            raise KeyError(f"sparse table {self.table}: no rows pulled for this step; pass the "
                           "batch's keys to ModelWorker.pull(keys=...)")
        local = torch.searchsorted(self.keys, input)
        held = (local < len(self.keys)) & (self.keys[local.clamp(max=len(self.keys) - 1)] == input)
        if not bool(held.all()):
            missing = input[~held][:5].tolist()
            raise KeyError(f"sparse table {self.table}: keys {missing} were not pulled for this "
                           "step; pass the batch's keys to ModelWorker.pull(keys=...)")
        return torch.nn.functional.embedding_bag(local, self.rows, offsets, mode=self.mode)


class _NativeSparseTable:
    """An nn.Embedding or nn.EmbeddingBag made with sparse=True, as a sparse table on the shards
    named by the module's name in the model: its weight holds the rows that
    ModelWorker.pull(keys={name: ...}) fetched for the step (the shards' rows, written in place),
    a forward that reads another row is a KeyError, and its sparse gradient goes back as the
    table's rows. The rows start at the shards' initializer (GLOROT_UNIFORM), not at the
    module's own."""

    def __init__(self, name, module):
        if module.max_norm is not None:
            raise ValueError(f"{name}: an embedding with max_norm renormalizes its rows in the "
                             "forward pass, which the shards would not see; drop max_norm")
        if module.padding_idx is not None:
            raise ValueError(f"{name}: padding_idx keeps a row at zero, which a sparse table on "
                             "the shards does not; drop padding_idx (or leave that key out of "
                             "the batches)")
        self.name, self.module, self.dim = name, module, module.embedding_dim
        self.keys = torch.zeros(0, dtype=torch.int64)
        # One check per module, whichever ModelWorker wraps it last.
        previous = getattr(module, "_ps_check_hook", None)
        if previous is not None:
            previous.remove()
        module._ps_check_hook = module.register_forward_pre_hook(self._check)

    def check_keys(self, keys):
        """Refuses, before anything is pulled, keys that are no rows of the module."""
        if len(keys) and (int(keys.min()) < 0 or int(keys.max()) >= self.module.num_embeddings):
            bad = int(keys.min()) if int(keys.min()) < 0 else int(keys.max())
            raise IndexError(f"{self.name}: key {bad} is not one of the module's "
                             f"{self.module.num_embeddings} rows")

    def hold(self, keys, rows):
        keys = torch.from_numpy(keys.astype(np.int64))
        with torch.no_grad():
            self.module.weight[keys] = torch.from_numpy(rows)
        self.keys = keys

    def _check(self, module, inputs):
        used = inputs[0].reshape(-1)
        held = torch.isin(used, self.keys)
        if not bool(held.all()):
            missing = used[~held][:5].tolist()
            raise KeyError(f"sparse table {self.name}: keys {missing} were not pulled for this "
                           "step; pass the batch's keys to ModelWorker.pull(keys=...)")

    def gradient(self):
        grad = self.module.weight.grad
        if grad is None:
            return None
        if not grad.is_sparse:
            raise ValueError(f"{self.name}: its weight's gradient is dense (the weight is used "
                             "elsewhere too, e.g. tied to an output layer); a sparse table takes "
                             "the rows of the module's sparse gradient only")
        grad = grad.coalesce()  # Distinct keys, the gradients of a repeated key summed.
        return (grad.indices()[0].numpy().astype(np.uint64),
                grad.values().detach().contiguous().numpy())


class ModelWorker:
    """Pulls the job's values into a module's parameters and pushes their gradients."""

    def __init__(self, client, model, job, worker, num_workers, incarnation=0, first_step=0,
                 init="chief"):
        if init not in ("chief", "shards"):
            raise ValueError(f"init {init!r}: 'chief' (the chief's model's values) or 'shards' "
                             "(the shards' initializers)")
        self.model = model
        self._tables = {m.table: m for m in model.modules() if isinstance(m, SparseEmbeddingBag)}
        for name, m in model.named_modules():
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
                self._tables[name] = _NativeSparseTable(name, m)
        tabled = {id(t.module.weight) for t in self._tables.values()
                  if isinstance(t, _NativeSparseTable)}
        self._parameters = [(name, p) for name, p in model.named_parameters()
                            if p.requires_grad and id(p) not in tabled]
        if not self._parameters:
            raise ValueError("the model has no dense parameters that require grad")
        for name, p in self._parameters:
            _check_cpu_float32(name, p, "parameter")
            if not p.is_contiguous():
                raise ValueError(f"parameter {name} is not contiguous")
        self.job = ps.Job(job, {name: tuple(p.shape) for name, p in self._parameters},
                          num_workers, {name: m.dim for name, m in self._tables.items()},
                          chief_initializes=init == "chief")
        chief_values = None
        if init == "chief" and int(worker) == 0:
            chief_values = {name: p.detach().numpy() for name, p in self._parameters}
        self.worker = ps.Worker(client, self.job, worker, incarnation, first_step=first_step,
                                initial_values=chief_values)
        for name, p in self._parameters:
            if self.worker.variables[name] != (tuple(p.shape) or (1,)):
                raise ValueError(f"parameter {name} has shape {tuple(p.shape)}, the job's "
                                 f"variable {self.worker.variables[name]}")
        # Views of the parameters' memory: a pull writes into the model without a copy.
        self._views = {name: p.detach().numpy().reshape(self.worker.variables[name])
                       for name, p in self._parameters}
        self._zeros = {}

    @classmethod
    def from_environment(cls, model, init="chief"):
        """The worker of the program job ps_worker started this process for (ps.from_environment):
        the job's JobSpec, this worker's index, incarnation and first step."""
        task = ps.from_environment()
        return cls(task.client, model, task.job, task.worker, task.num_workers,
                   task.incarnation, task.first_step, init)

    def pull(self, keys=None):
        """Writes the job's values into the model's parameters (waiting as the mode says), and,
        for each SparseEmbeddingBag table in `keys` (table -> the step's keys, any int
        array), the rows of those keys into the module."""
        sparse = []
        for table, wanted in (keys or {}).items():
            if table not in self._tables:
                raise KeyError(f"no sparse table {table!r} in the model (a SparseEmbeddingBag's "
                               "table, or the name of an nn.Embedding or nn.EmbeddingBag made "
                               f"with sparse=True); it has {sorted(self._tables)}")
            unique = np.unique(np.asarray(wanted, dtype=np.int64))
            if isinstance(self._tables[table], _NativeSparseTable):
                self._tables[table].check_keys(unique)
            unique = unique.astype(np.uint64)
            rows = np.zeros((len(unique), self._tables[table].dim), np.float32)
            sparse.append((table, unique, rows))
        self.worker.pull(self._views, sparse)
        for table, unique, rows in sparse:
            self._tables[table].hold(unique, rows)

    def pull_latest(self):
        """The values the shards hold now into the model, waiting for nothing (the final model
        once every worker has left)."""
        self.worker.pull_latest(self._views)

    def push(self):
        """Sends each parameter's .grad (zeros where backward left none) and each sparse
        table's held rows' gradients; returns each shard's answer."""
        sparse = []
        for table, module in self._tables.items():
            rows = module.gradient()
            if rows is not None:
                sparse.append((table, *rows))
        return self.worker.push(self._gradients(), sparse)

    def push_pull(self):
        """push(), then the next step's values into the parameters, in one round trip per
        shard (the next step needs no pull()); returns push()'s answers."""
        if self._tables:
            raise ValueError("push_pull carries no sparse rows: with SparseEmbeddingBag tables, "
                             "push() and then pull(keys=...) the next step's rows")
        return self.worker.push_pull(self._gradients(), self._views)

    def _gradients(self):
        gradients = {}
        for name, p in self._parameters:
            grad = p.grad
            if grad is None:
                grad = self._zeros.setdefault(name, torch.zeros_like(p))
            _check_cpu_float32(name, grad, "the gradient of")
            if grad.is_sparse:
                raise ValueError(f"the gradient of {name} is sparse: only nn.Embedding and "
                                 "nn.EmbeddingBag (sparse=True) become sparse tables")
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
