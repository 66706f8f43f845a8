"""PyTorch workers through the parameter servers against PyTorch's own DistributedDataParallel
(issue 32, section 4): the Fashion-MNIST CNN of examples/pytorch/fashion_mnist_cnn.py, batches
of 16 per process, on 1, 2 and 4 processes of this machine, trained (a) through 2 ps_server
shards in SYNC and in ASYNC (python/ps, ps.pytorch) and (b) with DDP over gloo. Each
configuration runs `--steps` steps per process after `--warmup` untimed ones; its figure is the
examples all processes trained per second of the slowest process's timed loop. The sides
alternate within each repetition (ps SYNC, DDP, ps ASYNC, then the next N), and the table gives
each side's median over `--repeats` and DDP's ratio to it. Then, on --target_workers processes,
each side's seconds until rank 0's model reaches --target_accuracy on the first 2,000 test
images (checked every --eval_every steps; the check's time counts), alternating likewise.

    bench/pytorch_ddp_bench.sh          (builds ps_server and the package, then runs this)
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "pytorch"))
import fashion_mnist_cnn as example  # noqa: E402  (the network and the data)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ps(ps_server, num_ps, folder):
    spec = os.path.join(folder, "cluster.json")
    with open(spec, "w") as f:
        json.dump({"ps": [f"127.0.0.1:{free_port()}" for _ in range(num_ps)],
                   "worker": ["127.0.0.1:9"]}, f)
    processes, addresses = [], []
    for i in range(num_ps):
        port_file = os.path.join(folder, f"ps{i}.port")
        with open(os.path.join(folder, f"ps{i}.log"), "w") as log:
            processes.append(subprocess.Popen(
                [ps_server, f"--cluster_spec={spec}", f"--task=ps:{i}", "--port=0",
                 f"--port_file={port_file}"], stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.time() > deadline or processes[-1].poll() is not None:
                raise RuntimeError(f"ps:{i} did not start; see {folder}/ps{i}.log")
            time.sleep(0.05)
        addresses.append("127.0.0.1:" + open(port_file).read().strip())
    return processes, addresses


def loop(model, step_fn, x, y, rank, world, warmup, steps, batch):
    """Runs warmup + steps steps on this rank's batches; returns the timed steps' seconds."""
    start = None
    for step in range(warmup + steps):
        if step == warmup:
            start = time.perf_counter()
        at = ((step * world + rank) * batch) % (len(x) - batch)
        step_fn(x[at:at + batch], y[at:at + batch])
    return time.perf_counter() - start


def to_target(model, step_fn, x, y, rank, world, args, stop, agree=None):
    """Trains this rank's batches until rank 0's model reaches args.target_accuracy on the
    first 2,000 test images (checked every args.eval_every steps) or args.max_steps pass.
    Returns rank 0's seconds to the target (inf when it was not reached), None on other ranks.
    `agree(done)` (DDP) makes every rank stop at the same step; without it, rank 0 sets `stop`
    and the others end at their next step."""
    test_x, test_y = example.load(args.data_dir, "t10k")
    test_x, test_y = test_x[:2000], test_y[:2000]
    evaluated = getattr(model, "module", model)
    start = time.perf_counter()
    for step in range(1, args.max_steps + 1):
        at = (((step - 1) * world + rank) * args.batch) % (len(x) - args.batch)
        step_fn(x[at:at + args.batch], y[at:at + args.batch])
        if step % args.eval_every == 0:
            done = rank == 0 and example.evaluate(evaluated, test_x, test_y)["accuracy"] >= \
                args.target_accuracy
            if agree is not None:
                done = agree(done)
            elif done:
                stop.set()
            if done:
                return time.perf_counter() - start if rank == 0 else None
        if agree is None and stop.is_set():
            return None
    return float("inf") if rank == 0 else None


def ps_process(rank, world, addresses, mode, job_id, args, results, stop=None):
    torch.set_num_threads(1)
    import ps
    import ps.pytorch
    torch.manual_seed(1)
    x, y = example.load(args.data_dir, "train")
    model = example.network()
    job = {"job_id": job_id, "consistency": {"mode": mode}, "optimizer": {"kind": "SGD"},
           "learning_rate": {"base": 0.05}, "seed": 1}
    worker = ps.pytorch.ModelWorker(ps.connect(addresses), model, job, rank, world)

    def step(bx, by):
        worker.pull()
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(bx), by).backward()
        worker.push()

    if stop is not None:
        results.put(to_target(model, step, x, y, rank, world, args, stop))
    else:
        results.put(loop(model, step, x, y, rank, world, args.warmup, args.steps, args.batch))
    worker.leave()


def ddp_process(rank, world, port, args, results, stop=None):
    torch.set_num_threads(1)
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.manual_seed(1)
    x, y = example.load(args.data_dir, "train")
    model = torch.nn.parallel.DistributedDataParallel(example.network())
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(bx, by):
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(model(bx), by).backward()
        sgd.step()

    def agree(done):
        flag = torch.tensor([1 if done else 0])
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    if stop is not None:
        results.put(to_target(model, step, x, y, rank, world, args, stop, agree))
    else:
        results.put(loop(model, step, x, y, rank, world, args.warmup, args.steps, args.batch))
    # PyTorch 1.13's gloo teardown can deadlock (the Reducer's destructor waits for the
    # group's thread, which waits for the GIL to free a tensor): the figure is in, so the
    # process ends without it, which closes its connections.
    os._exit(0)


def run(target, world, extra, args, to_target_accuracy=False):
    """Examples per second of `world` processes of `target`; or, with to_target_accuracy,
    rank 0's seconds to args.target_accuracy."""
    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    stop = context.Event() if to_target_accuracy else None
    processes = [context.Process(target=target,
                                 args=(rank, world) + extra + (args, results, stop))
                 for rank in range(world)]
    for p in processes:
        p.start()
    seconds = [results.get() for _ in processes]
    for p in processes:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"{target.__name__} exited {p.exitcode}")
    if to_target_accuracy:
        return min(s for s in seconds if s is not None)
    return world * args.steps * args.batch / max(seconds)


def sides(world, addresses, args, label, to_target_accuracy=False):
    """Each side's figure once, in the alternating order ps SYNC, DDP, ps ASYNC."""
    figures = {}
    for side in ("ps SYNC", "DDP gloo", "ps ASYNC"):
        if side == "DDP gloo":
            figures[side] = run(ddp_process, world, (free_port(),), args, to_target_accuracy)
        else:
            mode = side.split()[1]
            figures[side] = run(ps_process, world, (addresses, mode, f"{label}-{mode}-{world}"),
                                args, to_target_accuracy)
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps_server", required=True)
    parser.add_argument("--data_dir", default=example.DATA)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target_accuracy", type=float, default=0.85,
                        help="then time to this test accuracy on --target_workers (0: skip)")
    parser.add_argument("--target_workers", type=int, default=4)
    parser.add_argument("--target_repeats", type=int, default=2)
    parser.add_argument("--eval_every", type=int, default=100)
    parser.add_argument("--max_steps", type=int, default=4000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ddp_bench_")
    servers, addresses = start_ps(args.ps_server, 2, folder)
    figures = {}
    try:
        for repeat in range(args.repeats):
            for world in [int(n) for n in args.workers.split(",")]:
                for side, value in sides(world, addresses, args, f"bench-{repeat}").items():
                    figures.setdefault((world, side), []).append(value)
                    print(f"repeat {repeat} N={world} {side}: {value:.0f} examples/s",
                          flush=True)
        to_target = {}
        for repeat in range(args.target_repeats if args.target_accuracy > 0 else 0):
            for side, value in sides(args.target_workers, addresses, args, f"target-{repeat}",
                                     to_target_accuracy=True).items():
                to_target.setdefault(side, []).append(value)
                print(f"repeat {repeat} N={args.target_workers} {side}: {value:.1f} s to "
                      f"{args.target_accuracy:.0%} test accuracy", flush=True)
    finally:
        for server in servers:
            server.terminate()
            server.wait()
    if figures:
        print("\n| processes | ps SYNC ex/s | ps ASYNC ex/s | DDP gloo ex/s | DDP / ps SYNC "
              "| DDP / ps ASYNC |")
        print("|---|---|---|---|---|---|")
    for world in [int(n) for n in args.workers.split(",")] if figures else []:
        med = {side: statistics.median(figures[(world, side)])
               for side in ("ps SYNC", "ps ASYNC", "DDP gloo")}
        print(f"| {world} | {med['ps SYNC']:.0f} | {med['ps ASYNC']:.0f} | "
              f"{med['DDP gloo']:.0f} | {med['DDP gloo'] / med['ps SYNC']:.2f} | "
              f"{med['DDP gloo'] / med['ps ASYNC']:.2f} |")

    if to_target:
        med = {side: statistics.median(values) for side, values in to_target.items()}
        print(f"\nseconds to {args.target_accuracy:.0%} test accuracy (the first 2,000 test "
              f"images, checked every {args.eval_every} steps) on {args.target_workers} "
              "processes:\n")
        print("| ps SYNC s | ps ASYNC s | DDP gloo s | ps SYNC / DDP | ps ASYNC / DDP |")
        print("|---|---|---|---|---|")
        print(f"| {med['ps SYNC']:.1f} | {med['ps ASYNC']:.1f} | {med['DDP gloo']:.1f} | "
              f"{med['ps SYNC'] / med['DDP gloo']:.2f} | {med['ps ASYNC'] / med['DDP gloo']:.2f} |")


if __name__ == "__main__":
    main()
