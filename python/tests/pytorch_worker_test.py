"""Python and PyTorch workers on real ps_server daemons (issue 32, first part).

Exactness: SYNC with N PyTorch workers of batch b each ends with the weights of a plain
single-process PyTorch SGD run on batches of N*b in the same order (N = 2 and 4), from the chief's
initial values (its model's PyTorch initialization), which every worker's first pull returns. ASYNC: every push is applied and its staleness recorded by the shards. Bad
input: a wrong dtype, shape or set of variables, a worker out of range, a model whose shapes
differ from the job on the shards, another run's worker: clear errors, nothing changed.
"""
import threading
import time
import unittest

import numpy as np
import torch

import ps
import ps.pytorch
from cluster import LocalPs

torch.set_num_threads(1)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(8, 16)
        self.out = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def data(steps, batch):
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(steps * batch, 8, generator=generator)
    y = torch.randint(0, 3, (steps * batch,), generator=generator)
    return x, y


def job(job_id, mode, lr=0.1, **extra):
    spec = {"job_id": job_id, "consistency": {"mode": mode}, "learning_rate": {"base": lr},
            "seed": 11, "min_slice_bytes": 64}
    spec.update(extra)
    return spec


def run_threads(targets):
    errors = []

    def guarded(target):
        try:
            target()
        except BaseException as e:  # Reported below, so a worker's failure fails the test.
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        if t.is_alive():
            raise AssertionError("a worker thread still runs after 120 s")
    if errors:
        raise errors[0]


class PyTorchWorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = LocalPs(2)
        cls.client = ps.connect(cls.cluster.addresses)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def sync_matches_single_process_sgd(self, num_workers, push_pull=False):
        steps, batch, lr = 6, 4, 0.1
        x, y = data(steps, num_workers * batch)
        job_id = f"exact{num_workers}{'pp' if push_pull else ''}"
        models = [Mlp() for _ in range(num_workers)]  # Each its own PyTorch initialization.
        chiefs = {name: value.clone() for name, value in models[0].state_dict().items()}
        workers = [ps.pytorch.ModelWorker(self.client, models[i], job(job_id, "SYNC", lr), i,
                                          num_workers) for i in range(num_workers)]
        loss_fn = torch.nn.CrossEntropyLoss()

        # The job starts at the chief's model: the last worker's first pull is its values.
        workers[-1].pull()
        for name, value in models[-1].state_dict().items():
            torch.testing.assert_close(value, chiefs[name], rtol=0, atol=0, msg=name)
        reference = Mlp()
        reference.load_state_dict(chiefs)

        def train(i):
            model, worker = models[i], workers[i]
            worker.pull()
            for step in range(steps):
                rows = slice((step * num_workers + i) * batch, (step * num_workers + i + 1) * batch)
                model.zero_grad()
                loss_fn(model(x[rows]), y[rows]).backward()
                if push_pull:
                    worker.push_pull()  # And the next step's values, in one round trip.
                else:
                    worker.push()
                    worker.pull()
            # The values after the last step are in the model.

        run_threads([lambda i=i: train(i) for i in range(num_workers)])

        sgd = torch.optim.SGD(reference.parameters(), lr=lr)
        for step in range(steps):
            rows = slice(step * num_workers * batch, (step + 1) * num_workers * batch)
            sgd.zero_grad()
            loss_fn(reference(x[rows]), y[rows]).backward()
            sgd.step()
        for name, value in reference.state_dict().items():
            for model in models:
                np.testing.assert_allclose(model.state_dict()[name].numpy(), value.numpy(),
                                           rtol=0, atol=2e-6, err_msg=name)
        stats = self.client.job_stats(job_id)
        self.assertEqual([int(s.get("step", 0)) for s in stats], [steps] * 2)
        self.assertTrue(any(np.abs(reference.state_dict()["out.weight"].numpy()).sum() > 0
                            for _ in [0]))

    def test_sync_with_two_workers_is_sgd_on_twice_the_batch(self):
        self.sync_matches_single_process_sgd(2)

    def test_sync_with_four_workers_is_sgd_on_four_times_the_batch(self):
        self.sync_matches_single_process_sgd(4)

    def test_push_pull_in_one_round_trip_is_the_same_sgd(self):
        self.sync_matches_single_process_sgd(2, push_pull=True)

    def test_a_sparse_embedding_bag_is_sgd_on_the_shards_sparse_table(self):
        """SYNC with 2 workers, an embedding table on the shards (only the step's rows pulled and
        pushed) and a dense layer: the single-process nn.EmbeddingBag + SGD on twice the batch."""
        self.sparse_bag_is_sgd_on_the_shards_table("bag", lambda: ps.pytorch.SparseEmbeddingBag(
            "emb", 4), lambda module: module.rows)

    def test_pytorchs_own_sparse_embedding_bag_is_sgd_on_the_shards_sparse_table(self):
        """The same with nn.EmbeddingBag(sparse=True): its weight is the table "emb"."""
        self.sparse_bag_is_sgd_on_the_shards_table(
            "native_bag", lambda: torch.nn.EmbeddingBag(40, 4, mode="sum", sparse=True),
            lambda module: module.weight)

    def test_a_sparse_embedding_the_shards_cannot_hold_is_refused(self):
        class Model(torch.nn.Module):
            def __init__(self, **embedding):
                super().__init__()
                self.emb = torch.nn.Embedding(10, 4, sparse=True, **embedding)
                self.out = torch.nn.Linear(4, 2)

        with self.assertRaisesRegex(ValueError, "padding_idx"):
            ps.pytorch.ModelWorker(self.client, Model(padding_idx=0), job("pad", "ASYNC"), 0, 1)
        worker = ps.pytorch.ModelWorker(self.client, Model(), job("range", "ASYNC"), 0, 1)
        before = [int(s["version"]) for s in self.client.job_stats("range")]
        for bad in ([3, 10], [-1, 2]):
            with self.assertRaisesRegex(IndexError, "is not one of the module's 10 rows"):
                worker.pull(keys={"emb": np.array(bad)})
        self.assertEqual(worker.local_step, 0)
        self.assertEqual([int(s["version"]) for s in self.client.job_stats("range")], before)
        for shard in self.client.job_stats("range"):
            self.assertEqual(int(shard.get("sparse_rows", {}).get("emb", 0)), 0)

    def sparse_bag_is_sgd_on_the_shards_table(self, job_id, make_bag, rows_of):
        num_workers, steps, batch, vocab = 2, 5, 4, 40

        class Bag(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = make_bag()
                self.out = torch.nn.Linear(4, 3)

            def forward(self, keys, offsets):
                return self.out(self.emb(keys, offsets))

        generator = torch.Generator().manual_seed(9)
        keys = torch.randint(0, vocab, (steps * num_workers * batch, 3), generator=generator)
        labels = torch.randint(0, 3, (steps * num_workers * batch,), generator=generator)
        models = [Bag() for _ in range(num_workers)]
        workers = [ps.pytorch.ModelWorker(self.client, models[i], job(job_id, "SYNC", 0.5), i,
                                          num_workers) for i in range(num_workers)]
        everything = {"emb": torch.arange(vocab)}
        workers[0].pull(keys=everything)
        bag = torch.nn.EmbeddingBag(vocab, 4, mode="sum")
        with torch.no_grad():
            bag.weight.copy_(rows_of(models[0].emb))
        linear = torch.nn.Linear(4, 3)
        linear.load_state_dict(models[0].out.state_dict())

        def train(i):
            for step in range(steps):
                first = (step * num_workers + i) * batch
                rows = keys[first:first + batch]
                workers[i].pull(keys={"emb": rows})
                models[i].zero_grad()
                logits = models[i](rows.reshape(-1), torch.arange(0, 3 * batch, 3))
                torch.nn.functional.cross_entropy(logits, labels[first:first + batch]).backward()
                workers[i].push()

        run_threads([lambda i=i: train(i) for i in range(num_workers)])
        sgd = torch.optim.SGD(list(bag.parameters()) + list(linear.parameters()), lr=0.5)
        for step in range(steps):
            first = step * num_workers * batch
            rows = keys[first:first + num_workers * batch]
            sgd.zero_grad()
            logits = linear(bag(rows.reshape(-1), torch.arange(0, 3 * len(rows), 3)))
            torch.nn.functional.cross_entropy(logits, labels[first:first + len(rows)]).backward()
            sgd.step()
        workers[1].pull(keys=everything)
        np.testing.assert_allclose(rows_of(models[1].emb).detach().numpy(),
                                   bag.weight.detach().numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(models[1].out.weight.detach().numpy(),
                                   linear.weight.detach().numpy(), rtol=0, atol=2e-6)
        with self.assertRaisesRegex(KeyError, "were not pulled for this step"):
            models[1](torch.tensor([vocab + 5]), torch.tensor([0]))

    def test_async_applies_every_push_and_records_its_staleness(self):
        num_workers, steps = 2, 10
        x, y = data(steps, num_workers * 4)
        models = [Mlp() for _ in range(num_workers)]
        workers = [ps.pytorch.ModelWorker(self.client, models[i], job("async", "ASYNC"), i,
                                          num_workers, init="shards")
                   for i in range(num_workers)]
        staleness = []

        def train(i):
            for step in range(steps):
                workers[i].pull()
                rows = slice((step * num_workers + i) * 4, (step * num_workers + i + 1) * 4)
                models[i].zero_grad()
                torch.nn.functional.cross_entropy(models[i](x[rows]), y[rows]).backward()
                answers = workers[i].push()
                self.assertEqual({a["outcome"] for a in answers}, {"APPLIED"})
                staleness.extend(a["staleness"] for a in answers)
            workers[i].leave()

        run_threads([lambda i=i: train(i) for i in range(num_workers)])
        for shard in self.client.job_stats("async"):
            self.assertEqual(int(shard["applied_gradients"]), num_workers * steps)
            self.assertEqual(int(shard["version"]), num_workers * steps)
        self.assertEqual(len(staleness), num_workers * steps * 2)
        self.assertGreaterEqual(min(staleness), 0)

    def test_a_worker_waits_for_the_chiefs_values_and_a_rejoining_chief_keeps_the_shards(self):
        spec = job("chief", "ASYNC")
        chief, other = Mlp(), Mlp()
        chiefs = {name: value.clone() for name, value in chief.state_dict().items()}
        workers = {}

        def start(i, model):
            workers[i] = ps.pytorch.ModelWorker(self.client, model, spec, i, 2)

        # Worker 1 starts first: its create waits until the chief's has made the job.
        waiting = threading.Thread(target=start, args=(1, other))
        waiting.start()
        waiting.join(timeout=0.5)
        self.assertTrue(waiting.is_alive(), "worker 1 did not wait for the chief")
        start(0, chief)
        waiting.join(timeout=30)
        self.assertFalse(waiting.is_alive())
        workers[1].pull()
        for name, value in other.state_dict().items():
            torch.testing.assert_close(value, chiefs[name], rtol=0, atol=0, msg=name)

        # The chief comes back (a new process, a new model) and finds the job's values.
        reborn = Mlp()
        again = ps.pytorch.ModelWorker(self.client, reborn, spec, 0, 2, incarnation=1)
        again.pull()
        for name, value in reborn.state_dict().items():
            torch.testing.assert_close(value, chiefs[name], rtol=0, atol=0, msg=name)

        shapes = {"w": (3, 2)}
        with self.assertRaisesRegex(ValueError, "worker 0 must pass initial_values"):
            ps.Worker(self.client, ps.Job(job("c2", "ASYNC"), shapes, 2, chief_initializes=True),
                      0)
        with self.assertRaisesRegex(ValueError, "initial_values are the chief's"):
            ps.Worker(self.client, ps.Job(job("c2", "ASYNC"), shapes, 2, chief_initializes=True),
                      1, initial_values={"w": np.zeros((3, 2), np.float32)})
        with self.assertRaisesRegex(ValueError, "variable w: 4 elements"):
            ps.Worker(self.client, ps.Job(job("c2", "ASYNC"), shapes, 2, chief_initializes=True),
                      0, initial_values={"w": np.zeros((2, 2), np.float32)})
        with self.assertRaises(ps.Error) as nan:
            ps.Worker(self.client, ps.Job(job("c2", "ASYNC"), shapes, 2, chief_initializes=True),
                      0, initial_values={"w": np.full((3, 2), np.nan, np.float32)})
        self.assertEqual(nan.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ps.Error) as nowhere:
            self.client.job_stats("c2")
        self.assertEqual(nowhere.exception.code, "NOT_FOUND")

    def train_mode(self, job_id, consistency, num_workers, steps, slow=None, checks=None):
        """num_workers threads of ModelWorkers train `steps` steps each in `consistency`;
        worker `slow` sleeps 30 ms a step. checks(i, worker) runs after each of i's pulls.
        Returns each worker's push answers."""
        x, y = data(steps, num_workers * 4)
        spec = job(job_id, consistency["mode"], consistency=consistency)
        models = [Mlp() for _ in range(num_workers)]
        workers = [ps.pytorch.ModelWorker(self.client, models[i], spec, i, num_workers)
                   for i in range(num_workers)]
        answers = [[] for _ in range(num_workers)]

        def train(i):
            for step in range(steps):
                workers[i].pull()
                if checks:
                    checks(i, workers[i])
                if i == slow:
                    time.sleep(0.03)
                rows = slice((step * num_workers + i) * 4, (step * num_workers + i + 1) * 4)
                models[i].zero_grad()
                torch.nn.functional.cross_entropy(models[i](x[rows]), y[rows]).backward()
                answers[i].append(workers[i].push())
            workers[i].leave()

        run_threads([lambda i=i: train(i) for i in range(num_workers)])
        return answers

    def test_ssp_keeps_every_worker_within_the_bound_of_the_slowest(self):
        bound, pushed = 1, [0, 0, 0]
        waited = []

        def checks(i, worker):
            # A pull for clock c returns once every worker has pushed c - bound steps.
            self.assertGreaterEqual(min(pushed), worker.local_step - bound)
            waited.append(worker.worker.last_pull["parked_s"])
            pushed[i] = worker.local_step + 1  # Before the push: never under the shards' count.

        self.train_mode("ssp", {"mode": "SSP", "ssp_bound": bound}, 3, 8, slow=0, checks=checks)
        self.assertGreater(max(waited), 0.0, "no pull ever waited for the slow worker")
        for shard in self.client.job_stats("ssp"):
            self.assertEqual(int(shard["applied_gradients"]), 24)
            self.assertEqual(sorted(int(w["clock"]) for w in shard["workers"]), [8, 8, 8])

    def test_softsync_applies_the_mean_of_every_two_gradients(self):
        self.train_mode("softsync", {"mode": "SOFTSYNC", "softsync_n": 1}, 2, 6)
        for shard in self.client.job_stats("softsync"):
            self.assertEqual(int(shard["applied_gradients"]), 12)
            self.assertEqual(int(shard["applied_updates"]), 6)

    def test_sync_with_a_backup_worker_drops_the_late_gradient_of_each_step(self):
        answers = self.train_mode("backup", {"mode": "SYNC", "replicas_to_aggregate": 2}, 3, 6,
                                  slow=2)
        outcomes = [a["outcome"] for answer in answers[2] for a in answer]
        self.assertIn("DROPPED", outcomes)
        for shard in self.client.job_stats("backup"):
            self.assertEqual(int(shard["step"]), int(shard["applied_updates"]))
            # Every gradient went into its step's update or was dropped as late (once workers
            # leave, the last steps close with fewer).
            dropped = int(shard["dropped"]["stale_step"])
            self.assertGreater(dropped, 0)
            self.assertEqual(int(shard["applied_gradients"]) + dropped, 18)

    def test_bad_input_is_refused_and_changes_nothing(self):
        spec = job("bad", "ASYNC")
        worker = ps.Worker(self.client, ps.Job(spec, {"w": (3, 2), "b": (2,)}, 2), 0)
        values = worker.pull()
        version = [int(s["version"]) for s in self.client.job_stats("bad")]

        with self.assertRaisesRegex(TypeError, "variable w: dtype is not float32"):
            worker.push({"w": np.zeros((3, 2)), "b": np.zeros(2, np.float32)})
        with self.assertRaisesRegex(ValueError, "variable w: 4 elements, the job's variable has 6"):
            worker.push({"w": np.zeros((2, 2), np.float32), "b": np.zeros(2, np.float32)})
        with self.assertRaisesRegex(KeyError, "missing b"):
            worker.push({"w": np.zeros((3, 2), np.float32)})
        with self.assertRaisesRegex(KeyError, "not in the job: c"):
            worker.push({"w": values["w"], "b": values["b"], "c": values["b"]})
        with self.assertRaisesRegex(ValueError, "not C-contiguous"):
            worker.push({"w": np.zeros((2, 3), np.float32).T, "b": np.zeros(2, np.float32)})
        with self.assertRaisesRegex(TypeError, "is not an array"):
            worker.push({"w": [0.0] * 6, "b": np.zeros(2, np.float32)})
        with self.assertRaises(ps.Error) as nan:
            worker.push({"w": np.full((3, 2), np.nan, np.float32), "b": np.zeros(2, np.float32)})
        self.assertEqual(nan.exception.code, "INVALID_ARGUMENT")
        self.assertIn("NaN", str(nan.exception))

        # A worker out of range, a model of other shapes under the same job id, another run.
        with self.assertRaises(ps.Error) as out_of_range:
            ps.Worker(self.client, ps.Job(spec, {"w": (3, 2), "b": (2,)}, 2), 5)
        self.assertEqual(out_of_range.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ps.Error) as other_shapes:
            ps.Worker(self.client, ps.Job(spec, {"w": (4, 2), "b": (2,)}, 2), 1)
        self.assertIn(other_shapes.exception.code, ("ALREADY_EXISTS", "FAILED_PRECONDITION"))
        other_run = ps.Worker(self.client, ps.Job(dict(spec, run_id="another"),
                                                  {"w": (3, 2), "b": (2,)}, 2), 1, create=False)
        with self.assertRaises(ps.Error) as stranger:
            other_run.pull()
        self.assertEqual(stranger.exception.code, "FAILED_PRECONDITION")

        self.assertEqual([int(s["version"]) for s in self.client.job_stats("bad")], version)
        np.testing.assert_array_equal(worker.pull()["w"], values["w"])

    def test_torch_parameters_must_be_float32_on_the_cpu(self):
        with self.assertRaisesRegex(TypeError, "is torch.float64; .*model.float"):
            ps.pytorch.ModelWorker(self.client, Mlp().double(), job("double", "ASYNC"), 0, 1)
        with self.assertRaisesRegex(ValueError, "a Python worker pulls the model from the shards"):
            ps.pytorch.ModelWorker(self.client, Mlp(), job("ring", "ALLREDUCE"), 0, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
