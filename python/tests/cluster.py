"""Real ps_server daemons on loopback for the Python workers' tests: started on free ports,
stopped (by their process id) when the test ends."""
import json
import os
import subprocess
import tempfile
import time


class LocalPs:
    """`num_ps` ps_server processes on 127.0.0.1, plaintext (loopback)."""

    def __init__(self, num_ps, ps_server=None):
        self.ps_server = ps_server or os.environ["PS_SERVER"]
        self.dir = tempfile.mkdtemp(prefix="ps_python_test_")
        spec = {"ps": [f"127.0.0.1:{1 + i}" for i in range(num_ps)], "worker": ["127.0.0.1:9"]}
        self.spec_file = os.path.join(self.dir, "cluster.json")
        with open(self.spec_file, "w") as f:
            json.dump(spec, f)
        self.processes = []
        self.addresses = []
        try:
            for i in range(num_ps):
                port_file = os.path.join(self.dir, f"ps{i}.port")
                with open(os.path.join(self.dir, f"ps{i}.log"), "w") as log:
                    self.processes.append(subprocess.Popen(
                        [self.ps_server, f"--cluster_spec={self.spec_file}", f"--task=ps:{i}",
                         "--port=0", f"--port_file={port_file}"],
                        stdout=log, stderr=subprocess.STDOUT))
                self.addresses.append(f"127.0.0.1:{self._wait_for_port(port_file, i)}")
        except Exception:
            self.stop()
            raise

    def _wait_for_port(self, port_file, i):
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.processes[i].poll() is not None:
                raise RuntimeError(f"ps:{i} exited ({self.processes[i].returncode}); see "
                                   f"{self.dir}/ps{i}.log")
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            time.sleep(0.05)
        raise RuntimeError(f"ps:{i} wrote no port within 30 s; see {self.dir}/ps{i}.log")

    def kill(self, i):
        """kill -9 of ps:i."""
        self.processes[i].kill()
        self.processes[i].wait()

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
