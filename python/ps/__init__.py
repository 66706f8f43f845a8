"""ps: Python workers for the parameter-server cluster.

The core is ps._client, a binding of the same C++ worker client ps_worker uses (sharding,
chunking, compression, TLS and tokens, leases, incarnations, run ids). This package adds the
Pythonic surface: specs from a JobSpec dict and a model's variables, NumPy arrays in and out, and
the step and clock bookkeeping of a worker's loop. ps.pytorch turns a torch.nn.Module into a
worker.

    import numpy as np, ps
    client = ps.connect(["127.0.0.1:7000"], certs_dir="/tmp/cluster", identity="worker0")
    job = ps.Job({"job_id": "lr", "consistency": {"mode": "SYNC"},
                  "learning_rate": {"base": 0.1}}, {"w": (10, 1)}, num_workers=2)
    worker = ps.Worker(client, job, worker=0)
    weights = worker.pull()          # {"w": array}, the values of the step the job is at.
    worker.push({"w": gradient})     # Then pull again: SYNC waits for the step's other pushes.
"""
import json
import os
import time

import numpy as np

from ps._client import Error, make_parameter_spec, spec_json
from ps import _client

__all__ = ["Error", "Job", "Client", "Worker", "Task", "connect", "from_environment", "report"]


def _initializer_for(shape):
    # Weight matrices and kernels get Glorot's uniform; biases and other vectors zeros, as
    # TensorFlow's and Keras's layers do by default.
    return ("GLOROT_UNIFORM", 0.0) if len(shape) >= 2 else ("ZEROS", 0.0)


class Job:
    """A job's spec as every ps shard holds it.

    job: the JobSpec as a dict (the JSON of config/jobs/*.json: job_id, consistency,
        learning_rate, optimizer, seed, run_id, ...); its model and data are the program's.
    variables: name -> shape, or name -> (shape, initializer kind, scale), in the order the
        program holds them (the partitioner places them by name and size).
    num_workers: the workers of the job.
    sparse_tables: name -> width, or name -> (width, initializer kind, scale): tables of float
        rows by 64-bit key (embeddings), each key's row on the shard SparseShardOf places it,
        made on first touch (GLOROT_UNIFORM by default).
    chief_initializes: the variables start at the values the chief (worker 0) creates the job
        with (Worker's initial_values: a model's own initialization), not at the initializers;
        the other workers wait for the chief's create. Sparse tables keep their initializers.
    """

    def __init__(self, job, variables, num_workers, sparse_tables=None, chief_initializes=False):
        if not isinstance(job, dict) or not job.get("job_id"):
            raise ValueError("the job must be a dict with a job_id (a JobSpec as in "
                             "config/jobs/*.json)")
        defs = []
        for name, value in variables.items():
            if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], str):
                shape, kind, scale = value
            else:
                shape = value
                kind, scale = _initializer_for(tuple(shape))
            shape = [int(d) for d in shape] or [1]  # A scalar is one element.
            defs.append((name, shape, kind, float(scale)))
        self.job = dict(job)
        self.num_workers = int(num_workers)
        tables = []
        for name, value in (sparse_tables or {}).items():
            width, kind, scale = value if isinstance(value, tuple) else (value, "GLOROT_UNIFORM",
                                                                         0.0)
            tables.append((name, int(width), kind, float(scale)))
        self.chief_initializes = bool(chief_initializes)
        self.spec = make_parameter_spec(json.dumps(self.job), defs, self.num_workers, tables,
                                        self.chief_initializes)
        self.job_id = self.job["job_id"]
        self.run_id = self.job.get("run_id", "")

    def to_json(self):
        """The ParameterSpec, as JSON text."""
        return spec_json(self.spec)


class Client:
    """Connections to every ps task of a cluster (thread-safe); see connect()."""

    def __init__(self, core):
        self._core = core

    @property
    def num_ps(self):
        return self._core.num_ps

    def create_job(self, job, initial_values=None):
        """Creates `job` on every shard; a no-op for a job created with the same spec.
        initial_values (name -> float32 array, every variable): the chief's, for a job made with
        chief_initializes; without them such a job's create waits for the chief's."""
        self._core.create_job(job.spec, initial_values)

    def delete_job(self, job_id):
        self._core.delete_job(job_id)

    def leave_job(self, job, worker, incarnation=None):
        """Tells every shard that `worker` is done (SSP's and SYNC's peers stop waiting). With
        its `incarnation`, a leave that arrives after a newer incarnation joined changes nothing."""
        self._core.leave_job(job.job_id, job.run_id, int(worker),
                             None if incarnation is None else int(incarnation))

    def job_stats(self, job_id):
        """Each shard's JobStats as a dict, in ps order."""
        return [json.loads(text) for text in self._core.job_stats_json(job_id)]


def connect(addresses, certs_dir=None, identity=None, ca_file="", cert_file="", key_file="",
            token="", wait_timeout_s=60.0, call_timeout_s=30.0):
    """Connects to the ps tasks at `addresses` (task i of the "ps" job at addresses[i]).

    certs_dir: a folder `psctl certs` or `psctl local` wrote: `identity`.crt and .key (this
        worker's certificate, e.g. "worker0" or its host), ca.crt and cluster.token; the same
        files a daemon's --certs=DIR takes. Or name the files (ca_file, cert_file, key_file)
        and the token yourself. Without either, the channels are plaintext.
    """
    if certs_dir:
        if not identity:
            raise ValueError("certs_dir needs the identity whose certificate to present "
                             "(identity='worker0', or this host's name)")
        ca_file = ca_file or os.path.join(certs_dir, "ca.crt")
        cert_file = cert_file or os.path.join(certs_dir, identity + ".crt")
        key_file = key_file or os.path.join(certs_dir, identity + ".key")
        token_file = os.path.join(certs_dir, "cluster.token")
        if not token and os.path.exists(token_file):
            with open(token_file) as f:
                token = f.read().strip()
        for path in (ca_file, cert_file, key_file):
            if not os.access(path, os.R_OK):
                raise FileNotFoundError(f"certs_dir {certs_dir}: cannot read {path} (psctl certs "
                                        "writes a certificate per identity, and ca.crt)")
    return Client(_client.Client(list(addresses), ca_file=ca_file, cert_file=cert_file,
                                 key_file=key_file, token=token, wait_timeout_s=wait_timeout_s,
                                 call_timeout_s=call_timeout_s))


class Worker:
    """One worker's pulls and pushes of a job, with its step and clock.

    A loop is: pull() (the values to compute on), compute a gradient, push(gradient), as
    ps_worker's is. In SYNC a pull waits until the job's step begins (every worker's gradient of
    the step before is applied); in SSP until no worker is more than the bound behind; in ASYNC
    it never waits. Each push carries the versions the gradient was computed from, so the ps
    records its staleness. Not thread-safe.

    create: create the job on the shards first (idempotent: every worker may).
    initial_values: for a job made with chief_initializes, the chief's (worker 0's) values of
        every variable (name -> float32 array), which the job starts at; the other workers give
        none and wait for the chief. A chief that rejoins (incarnation > 0) or resumes finds the
        job there and keeps the shards' values.
    """

    def __init__(self, client, job, worker, incarnation=0, create=True, first_step=0,
                 initial_values=None):
        if initial_values is not None and not (job.chief_initializes and int(worker) == 0):
            raise ValueError("initial_values are the chief's (worker 0) of a job made with "
                             "chief_initializes=True")
        if job.chief_initializes and int(worker) == 0 and initial_values is None and create:
            raise ValueError(f"job {job.job_id} starts at its chief's values: worker 0 must "
                             "pass initial_values (every variable's array)")
        if create:
            client.create_job(job, initial_values)
        self.client = client
        self.job = job
        self.worker = int(worker)
        self.incarnation = int(incarnation)
        self._session = _client.Session(client._core, job.spec, self.worker, self.incarnation)
        self.variables = {name: tuple(shape) for name, shape in self._session.variables}
        # A resumed run's workers start at its resume step (StartJobRequest.first_step).
        self.local_step = int(first_step)   # Steps this worker has pushed (its SSP clock).
        self.job_step = int(first_step)     # SYNC: the step the values last pulled begin.
        self._next_step = int(first_step)   # SYNC: the step the next pull waits for.
        self.last_pull = None
        self.last_push = None
        self._staleness_sum = 0
        self._applied = 0
        self._start = time.monotonic()  # Training begins: what elapsed_seconds counts from.

    def zeros(self):
        """A dict of float32 zero arrays, one per variable, in the job's shapes."""
        return {name: np.zeros(shape, np.float32) for name, shape in self.variables.items()}

    def pull(self, out=None, sparse=()):
        """Fills `out` (name -> C-contiguous float32 array, every variable; made when None)
        with the job's values and returns it; `last_pull` then says the versions read, the step
        and how long the shards kept the pull waiting. `sparse`: (table, keys, rows) triples,
        keys a uint64 array, rows a float32 array of len(keys) rows to fill."""
        step = self._next_step if self._session.counts_steps else 0
        out = self._pull(out, step, self.local_step, sparse)
        self.job_step = self.last_pull["step"]
        return out

    def pull_latest(self, out=None):
        """Fills `out` with the values the shards hold now, waiting for nothing (no SYNC step,
        no SSP bound): after the job, the final model. Changes no step or clock."""
        return self._pull(out, 0, 0, ())

    def _pull(self, out, step, clock, sparse):
        if out is None:
            out = self.zeros()
        self.last_pull = self._session.pull(out, step=step, clock=clock, sparse=list(sparse))
        return out

    def push(self, gradients, sparse=()):
        """Sends `gradients` (name -> float32 array, every variable), computed on the values of
        the last pull, and `sparse` (table, keys, rows) triples of row gradients (distinct keys);
        returns each shard's answer (outcome, version, staleness, step)."""
        self.last_push = self._session.push(gradients, step=self.job_step, clock=self.local_step,
                                            sparse=list(sparse))
        self._count(self.last_push)
        self.local_step += 1
        if self._session.counts_steps:
            self._next_step = self.job_step + 1
        return self.last_push

    def push_pull(self, gradients, out):
        """push(gradients), then pull(out) for the next step, in one round trip per shard where
        the gradients fit one message (ps-lite's ZPushPull; ps_worker does the same): the next
        step starts with the values in `out` and needs no pull(). Returns push()'s answers."""
        next_step = self.job_step + 1 if self._session.counts_steps else 0
        answers, pulled = self._session.push_pull(gradients, self.job_step, self.local_step, out,
                                                  next_step, self.local_step + 1)
        self._count(answers)
        self.last_push, self.last_pull = answers, pulled
        self.local_step += 1
        self.job_step = pulled["step"]
        if self._session.counts_steps:
            self._next_step = self.job_step
        return answers

    def progress(self):
        """This worker's figures for report(): its steps, the job's step (SYNC), the mean
        staleness of its gradients the shards applied or aggregated so far, the bytes its
        pulls and pushes sent and received (summary.json's bytes per step), and the seconds
        since this Worker was made, training's start (the program's own start, imports and
        data loading, left out: psctl multiplies examples_per_second by them)."""
        return {"step": self.local_step, "global_step": self.job_step,
                "elapsed_seconds": time.monotonic() - self._start,
                "staleness": self._staleness_sum / self._applied if self._applied else 0.0,
                "bytes_sent": self._session.bytes_sent,
                "bytes_received": self._session.bytes_received}

    def _count(self, answers):
        for answer in answers:
            if answer["outcome"] in ("APPLIED", "ACCUMULATED"):
                self._staleness_sum += answer["staleness"]
                self._applied += 1

    def leave(self):
        """Done with the job: the others stop waiting for this worker."""
        self.client.leave_job(self.job, self.worker, self.incarnation)


class Task:
    """What a program job's worker is (from_environment): the job (its JobSpec as a dict), this
    worker's index among num_workers, its incarnation and first step, and a Client connected to
    the job's ps tasks with this daemon's TLS files and token."""

    def __init__(self, client, job, worker, num_workers, incarnation, first_step):
        self.client = client
        self.job = job
        self.worker = worker
        self.num_workers = num_workers
        self.incarnation = incarnation
        self.first_step = first_step


def from_environment():
    """The job and task of this process when ps_worker runs it as a program job's worker
    (JobSpec.program): psctl local/submit start the job, each worker's ps_worker starts the
    program with them in its environment (proto/job.proto's ProgramSpec lists the variables)."""
    env = os.environ
    if "PS_JOB" not in env:
        raise RuntimeError("no PS_JOB in the environment: this program was not started by "
                           "ps_worker as a program job's worker (submit a job whose "
                           "program.argv runs it, or connect() yourself)")
    token = ""
    if env.get("PS_TOKEN_FILE"):
        with open(env["PS_TOKEN_FILE"]) as f:
            token = f.read().strip()
    client = connect(env["PS_PS_ADDRESSES"].split(","), ca_file=env.get("PS_TLS_CA", ""),
                     cert_file=env.get("PS_TLS_CERT", ""), key_file=env.get("PS_TLS_KEY", ""),
                     token=token)
    return Task(client, json.loads(env["PS_JOB"]), int(env["PS_WORKER"]),
                int(env["PS_NUM_WORKERS"]), int(env.get("PS_INCARNATION", "0")),
                int(env.get("PS_FIRST_STEP", "0")))


def report(**progress):
    """Reports this worker's progress to its ps_worker, which psctl shows (the progress line)
    and writes to the results (eval.csv, summary.json): JobProgress's fields, e.g.
    report(step=120, epoch=1, loss=0.41, examples_per_second=900.0,
    eval={"loss": 0.38, "accuracy": 0.87}). A no-op outside a program job."""
    path = os.environ.get("PS_PROGRESS_FILE")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(progress) + "\n")
