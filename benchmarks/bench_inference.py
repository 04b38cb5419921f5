"""Judge inference throughput per batch size, through the real recording path (hf backend).

    python -m benchmarks.bench_inference --model ID --batch-sizes 1,8,32 [--engine local|ray]
        [--replicas N] [--gpus-per-replica G] [--prompts 16] [--orders 3] [--max-new-tokens 64]
        [--max-edge 448] [--device auto] [--db DB --dataset NAME]

ID is a transformers model id or folder (e.g. Qwen/Qwen3-VL-4B-Instruct on a
GPU), or `tiny-qwen3-vl` / `tiny-smolvlm`: a randomly initialised 1-layer
model built from its config (tests/support/vlms.py), for this CPU machine.
Each batch size records one fresh judge over the same requests into a
temporary copy of the database (generated pools of 3-4 small images, or a
copy of DB's dataset), then prints calls/s and s/call from the run's
recorded throughput (wall time from the first call to the last commit, model
loading excluded) and how many replies are the same text as at the first
batch size (greedy decoding: all of them, unless the kernels are not batch
invariant, as bfloat16 ones on a GPU may not be). Local runs load the model
once and warm it up with one call; each Ray run starts its replicas anew.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
from pathlib import Path

from audit_core import store
from runners.recording.engines import LocalEngine
from runners.selection.recorder import plan_requests, record_selector
from tests.support.pools import write_tiny_dataset


def batch_sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give batch sizes of at least 1, comma-separated: 1,8,32")
    return sizes

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_inference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="model id or folder, or tiny-qwen3-vl / tiny-smolvlm")
    parser.add_argument("--batch-sizes", type=batch_sizes, default=[1, 8, 32], help="comma-separated (default 1,8,32)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local")
    parser.add_argument("--replicas", type=int, default=None, help="ray: replicas (default one per GPU)")
    parser.add_argument("--gpus-per-replica", type=float, default=None, help="ray: GPUs per replica")
    parser.add_argument("--prompts", type=int, default=16,
                        help="prompts: generated (3-4 candidates each), or the first N of --db's dataset")
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-edge", type=int, default=448)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--db", type=Path, default=None, help="take the pools of this database (copied; not written)")
    parser.add_argument("--dataset", default=None, help="dataset of --db")
    return parser

def model_folder(name: str, tmp: Path) -> str:
    """The tiny model built into `tmp` for a tiny-* name; any other name as given."""
    from tests.support.vlms import BUILDERS

    if name in BUILDERS:
        return str(BUILDERS[name](tmp / name))
    return name

def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if (args.db is None) != (args.dataset is None):
        print("error: --db and --dataset go together", file=sys.stderr)
        return 2
    from runners.backends.hf import HFSelector

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        db, dataset = tmp / "bench.duckdb", args.dataset or "bench"
        if args.db is None:
            write_tiny_dataset(db, tmp / "images", dataset=dataset, n_prompts=args.prompts)
        else:
            shutil.copyfile(args.db, db)
        model = model_folder(args.model, tmp)
        make = functools.partial(HFSelector, model, max_new_tokens=args.max_new_tokens, max_edge=args.max_edge,
                                 device=args.device)
        backend = None
        if args.engine == "local":
            backend = make()
            con = store.connect(db, read_only=True)
            warm = plan_requests(con, dataset=dataset, judge="warm", orders=args.orders, contract="ranking",
                                 limit=args.prompts)[0][0]
            con.close()
            backend.generate(warm)
        rows, replies = [], {}
        for size in args.batch_sizes:
            if backend is not None:
                engine = LocalEngine(backend, batch_size=size)
            else:
                from runners.recording.ray_engine import RayEngine

                engine = RayEngine(make, replicas=args.replicas, gpus_per_replica=args.gpus_per_replica,
                                   batch_size=size)
            summary = record_selector(db, dataset=dataset, judge=f"bench-b{size}", backend=None, engine=engine,
                                      backend_name="hf", model=model, orders=args.orders, limit=args.prompts,
                                      progress=False)
            con = store.connect(db, read_only=True)
            config = json.loads(con.execute("SELECT config_json FROM runs WHERE run_id = ?",
                                            [summary.run_id]).fetchone()[0])
            texts = con.execute("SELECT prompt_id, order_index, raw_output FROM calls WHERE run_id = ?",
                                [summary.run_id]).fetchall()
            con.close()
            replies[size] = {(p, o): t for p, o, t in texts}
            rows.append((size, config["throughput"], config["execution"]))
        first = replies[args.batch_sizes[0]]
        execution = rows[0][2]
        where = (f"{execution['replicas']} replica(s), {execution['gpus_per_replica']:g} GPU each"
                 if args.engine == "ray" else f"device {backend.device}, {backend.dtype}")
        print(f"model {args.model}, engine {args.engine} ({where}), {len(first)} calls per configuration, "
              f"max {args.max_new_tokens} new tokens")
        print(f"{'batch':>5}  {'calls':>5}  {'wall s':>7}  {'calls/s':>7}  {'s/call':>7}  same text as batch "
              f"{args.batch_sizes[0]}")
        for size, speed, _ in rows:
            same = sum(replies[size].get(key) == text for key, text in first.items())
            print(f"{size:>5}  {speed['calls']:>5}  {speed['wall_seconds']:>7.2f}  {speed['calls_per_second']:>7.2f}  "
                  f"{speed['wall_seconds'] / speed['calls']:>7.3f}  {same}/{len(first)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
