"""The NumPy-only example (examples/numpy/linear_regression.py) on real ps_server daemons: 2
workers in SSP (bound 2) recover the hidden linear model, every push applied."""
import os
import sys
import threading
import unittest

import numpy as np

import ps
from cluster import LocalPs

sys.path.insert(0, os.path.join(os.environ.get("EXAMPLES_DIR", ""), "numpy"))
import linear_regression  # noqa: E402


class NumpyWorkerTest(unittest.TestCase):
    def test_ssp_workers_recover_the_hidden_linear_model(self):
        cluster = LocalPs(2)
        try:
            client = ps.connect(cluster.addresses)
            job = {"job_id": "numpy_linear", "consistency": {"mode": "SSP", "ssp_bound": 2},
                   "learning_rate": {"base": 0.05}, "batch_size": 32, "steps": 300, "seed": 4}
            results = [None, None]

            def run(i):
                results[i] = linear_regression.train(client, job, i, 2)

            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            self.assertTrue(all(r is not None for r in results), "a worker did not finish")
            _, _, true_w = linear_regression.data(4)
            values = results[0][1].pull_latest()
            np.testing.assert_allclose(values["w"], true_w, atol=0.05)
            np.testing.assert_allclose(values["b"], [0.5], atol=0.05)
            self.assertLess(max(r[0] for r in results), 0.01)
            # Each worker's report figures: its steps, and seconds since its Worker was made.
            progress = results[0][1].progress()
            self.assertEqual(progress["step"], 300)
            self.assertGreater(progress["elapsed_seconds"], 0)
            self.assertLess(progress["elapsed_seconds"], 120)
            for shard in client.job_stats("numpy_linear"):
                self.assertEqual(int(shard["applied_gradients"]), 600)
        finally:
            cluster.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
