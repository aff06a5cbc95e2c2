#!/usr/bin/env bash
# Every GPU figure of the project in one JSON, in one call of under 8 minutes on one GPU:
#
#     bash benchmarks/gpu_check.sh OUT.json                  # on a machine with a CUDA GPU
#     bash benchmarks/gpu_check.sh OUT.json --cpu-plumbing   # every step on the CPU at tiny sizes (seconds)
#
# Steps: the device (name, memory, torch, CUDA), the project's install where the Python lacks it
# (pip install -e .; torch is kept as it is), a synthetic dataset of random games (no WTHOR files
# needed), training samples/s in fp32 and bf16 (train_throughput.py --compare), the DDP code path on
# one GPU (train.py --devices 1 --strategy ddp: that it ran, and its steps/s), and self-play
# games/hour and evaluations/s of 512 games at once, PUCT and Gumbel, one step per inference path
# (selfplay.py, with the shipped best_handcrafted.pt). Each step has its own timeout within the
# whole budget (GPU_CHECK_BUDGET_S, 450 s); a failed step's error is recorded and the next one
# runs. OUT.json is rewritten whole (atomically) after each step, so a kill leaves the figures so
# far; "complete" is true once every step has had its turn. Exit status: 0 when every step passed,
# 1 when one failed, 2 on bad usage or without a GPU (one line; --cpu-plumbing or
# GPU_CHECK_CPU_PLUMBING=1 runs anyway, on the CPU).
set -u

usage="usage: bash benchmarks/gpu_check.sh OUT.json [--cpu-plumbing]"
out="" plumbing="${GPU_CHECK_CPU_PLUMBING:-0}"
for arg in "$@"; do
    case "$arg" in
        --cpu-plumbing) plumbing=1 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; echo "$usage"; exit 0 ;;
        -*) echo "gpu_check.sh: $arg: unknown option; $usage" >&2; exit 2 ;;
        *) if [ -n "$out" ]; then echo "gpu_check.sh: one OUT.json, got $out and $arg; $usage" >&2; exit 2; fi
           out="$arg" ;;
    esac
done
[ "$plumbing" = 0 ] || plumbing=1
if [ -z "$out" ]; then echo "gpu_check.sh: no OUT.json given; $usage" >&2; exit 2; fi
case "$out" in *.json) ;; *) echo "gpu_check.sh: $out: expected a .json file name" >&2; exit 2 ;; esac
out_dir=$(dirname -- "$out")
if [ ! -d "$out_dir" ]; then echo "gpu_check.sh: $out: no folder $out_dir" >&2; exit 2; fi
if [ -d "$out" ]; then echo "gpu_check.sh: $out: a folder, not a file name" >&2; exit 2; fi
if [ ! -w "$out_dir" ]; then echo "gpu_check.sh: $out: the folder $out_dir is not writable" >&2; exit 2; fi
out="$(cd -- "$out_dir" && pwd)/$(basename -- "$out")"

cd -- "$(dirname -- "$0")/.." || exit 2
py="${PYTHON:-$(command -v python3 || command -v python)}"
budget="${GPU_CHECK_BUDGET_S:-450}"
case "$budget" in ''|*[!0-9]*) echo "gpu_check.sh: GPU_CHECK_BUDGET_S=$budget: expected whole seconds" >&2; exit 2 ;; esac
t0=$(date +%s)

# Before any work: a GPU (or --cpu-plumbing), with torch alone (the project may not be installed yet).
if ! gpus=$("$py" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null); then
    echo "gpu_check.sh: $py cannot import torch; install torch (with CUDA) first" >&2; exit 2
fi
if [ "$gpus" = 0 ] && [ "$plumbing" = 0 ]; then
    echo "gpu_check.sh: torch sees no CUDA GPU on this machine: nothing measured (--cpu-plumbing runs the steps on the CPU at tiny sizes)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || exit 2
trap 'rm -rf -- "$work"' EXIT
state="$work/state.json"

# The JSON's keeper: stdlib only, as it runs before the project's install.
cat > "$work/record.py" <<'PY'
"""record.py init STATE OUT MODE | step STATE OUT NAME RC WALL_NS TIMEOUT LOG [RESULT] | skip|note STATE OUT NAME WHY
| finish STATE OUT"""
import csv, json, os, sys, time

def save(state, path, out):
    state["figures"] = figures(state["steps"])
    for target in (path, out):
        tmp = f"{target}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)

def figures(steps):
    fig = {}
    train = steps.get("train", {}).get("result") or {}
    if "baseline_samples_per_s" in train:
        fig["train_fp32_samples_per_s"] = train["baseline_samples_per_s"]
    if "recipe_samples_per_s" in train:
        fig["train_bf16_samples_per_s"] = train["recipe_samples_per_s"]
    ddp = steps.get("ddp", {}).get("result") or {}
    if ddp.get("steps_per_s") is not None:
        fig["ddp_steps_per_s"] = ddp["steps_per_s"]
    for name, step in steps.items():
        for row in (step.get("result") or {}).get("rows", ()) if name.startswith("selfplay") else ():
            fig.setdefault("selfplay", {})[f"{row['path']} {row['search']}"] = {
                k: row[k] for k in ("games_per_hour", "evaluations_per_s", "mean_batch")}
    return fig

def tail(log, lines=6, chars=2000):
    try:
        text = open(log, errors="replace").read().replace("\r", "\n")
    except OSError:
        return ""
    return "\n".join([ln for ln in text.splitlines() if ln.strip()][-lines:])[-chars:]

def ddp_result(run):
    """global_step from the run's metrics.json, the training seconds from the Timer's time/hours
    (logged at the last validation): the fit's training loop, first steps and that validation included."""
    summary = json.load(open(os.path.join(run, "metrics.json")))
    hours = None
    with open(os.path.join(run, "csv", "version_0", "metrics.csv")) as f:
        for row in csv.DictReader(f):
            hours = float(row["time/hours"]) if row.get("time/hours") else hours
    steps = summary["global_step"]
    seconds = None if hours is None else hours * 3600
    return {"global_step": steps, "training_seconds": seconds,
            "steps_per_s": steps / seconds if seconds else None,
            "batch_size": summary["config"]["data"].get("batch_size")}

cmd, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
if cmd == "init":
    state = {"what": "othello-learn benchmarks/gpu_check.sh", "mode": sys.argv[4], "complete": False,
             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "steps": {}}
    save(state, path, out)
    sys.exit()
state = json.load(open(path))
if cmd == "finish":
    state["complete"] = True
    state["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    state["failed_steps"] = [n for n, s in state["steps"].items() if s.get("rc") not in (0, None)]
    state["skipped_steps"] = [n for n, s in state["steps"].items() if s.get("skipped")]
    save(state, path, out)
    sys.exit(1 if state["failed_steps"] or state["skipped_steps"] else 0)
name = sys.argv[4]
if cmd in ("skip", "note"):  # a step left out for want of time, or one with nothing to do
    state["steps"][name] = {"skipped": sys.argv[5]} if cmd == "skip" else {"rc": 0, "note": sys.argv[5]}
    save(state, path, out)
    sys.exit()
rc, wall, timeout, log = int(sys.argv[5]), int(sys.argv[6]) / 1e9, int(sys.argv[7]), sys.argv[8]
extra = sys.argv[9] if len(sys.argv) > 9 else ""
step = {"rc": rc, "wall_s": round(wall, 2), "timeout_s": timeout}
if rc in (124, 137):
    step["error"] = f"timed out after {timeout} s; the log ended: {tail(log)}"
elif rc:
    step["error"] = tail(log)
try:
    if extra.startswith("ddp:"):
        log_text = open(log, errors="replace").read()
        step["result"] = {"ddp_initialized": "Initializing distributed" in log_text, **ddp_result(extra[4:])}
        step["ran"] = rc == 0 and step["result"]["ddp_initialized"]
    elif extra and os.path.exists(extra):
        step["result"] = json.load(open(extra))
except (OSError, ValueError, KeyError, TypeError) as e:
    step.setdefault("error", f"its result could not be read: {type(e).__name__}: {e}")
    step["rc"] = rc or 1
state["steps"][name] = step
save(state, path, out)
PY

record() { "$py" "$work/record.py" "$@"; }
if ! record init "$state" "$out" "$([ "$plumbing" = 1 ] && echo cpu-plumbing || echo gpu)" 2> "$work/init.log"; then
    echo "gpu_check.sh: $out: cannot be written ($(tail -n 1 "$work/init.log"))" >&2
    exit 2
fi

# step NAME CAP RESULT COMMAND...: runs COMMAND under `timeout`, at most CAP seconds and what is
# left of the budget, its output in a log; records its exit status, wall time and RESULT (a JSON
# file the command wrote, or ddp:RUN).
step() {
    local name=$1 cap=$2 result=$3 left limit start rc end
    shift 3
    left=$(( budget - ($(date +%s) - t0) ))
    limit=$(( cap < left ? cap : left ))
    if [ "$limit" -lt 1 ]; then
        record skip "$state" "$out" "$name" "out of time: the budget of $budget s was spent"
        echo "gpu_check: $name: skipped, out of time" >&2
        return
    fi
    echo "gpu_check: $name (at most $limit s)" >&2
    start=$(date +%s%N)
    timeout -k 10 "$limit" "$@" > "$work/$name.log" 2>&1
    rc=$?
    end=$(date +%s%N)
    record step "$state" "$out" "$name" "$rc" "$(( end - start ))" "$limit" \
        "$work/$name.log" "$result"
    echo "gpu_check: $name: exit status $rc" >&2
}

# The device and versions. torch.version.cuda is None on a CPU build.
step device 60 "$work/device.json" "$py" -c '
import json, os, platform, subprocess, sys, torch
cuda = torch.cuda.is_available()
props = torch.cuda.get_device_properties(0) if cuda else None
try:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10).stdout.strip()
except (OSError, subprocess.SubprocessError):
    commit = ""
json.dump({"name": props.name if cuda else platform.processor() or platform.machine(),
           "memory_bytes": props.total_memory if cuda else None,
           "capability": f"{props.major}.{props.minor}" if cuda else None,
           "gpus": torch.cuda.device_count() if cuda else 0,
           "bf16_supported": torch.cuda.is_bf16_supported() if cuda else None,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if cuda else None,
           "python": platform.python_version(), "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
           "git_commit": commit or None}, open(sys.argv[1], "w"), indent=1)
' "$work/device.json"

# The project, where this Python lacks it or its dependencies (torch, if there, is kept: torch>=2.3).
# Found, not imported: Lightning's import alone takes seconds.
if "$py" -c '
import importlib.util, re, sys
import othello_learn
try:
    import tomllib
    deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
except (ImportError, OSError, KeyError):  # Python 3.10 has no tomllib: then pip decides
    sys.exit(1)
modules = [{"pyyaml": "yaml"}.get(n, n) for n in (re.match(r"[A-Za-z0-9_.-]+", d).group().lower() for d in deps)]
sys.exit(any(importlib.util.find_spec(m) is None for m in modules))
' > /dev/null 2>&1; then
    record note "$state" "$out" install "not needed: this Python imports the project and its dependencies"
else
    step install 180 "" "$py" -m pip install --disable-pip-version-check -q -e .
fi

if [ "$plumbing" = 1 ]; then  # seconds on a CPU: the plumbing, not figures
    printf 'model: {arch: reference, encoder: raw, depth: 1, width: 8}\ndata: {batch_size: 64, val_positions: 128}\n' \
        > "$work/tiny.yaml"
    positions=3000 train_config="$work/tiny.yaml" train_sizes=(--steps 2 --rounds 1)
    ddp_flags=(--config "$work/tiny.yaml" --accelerator cpu --max-steps 3)
    selfplay_flags=(--arch resnet --blocks 1 --width 8 --games 2 --simulations 1 --rounds 1 --device cpu)
    paths=(plain)
else
    positions=200000 train_config=train/configs/ref_raw_d10.yaml train_sizes=(--steps 50 --rounds 3)
    ddp_flags=(--config train/configs/ref_raw_d10.yaml --max-steps 300 --set data.val_positions=8192)
    # 16 simulations: as the CPU figures in benchmarks/selfplay.py's docstring
    selfplay_flags=(--checkpoint checkpoints/best_handcrafted.pt --games 512 --simulations 16 --rounds 1 --device cuda)
    paths=(bf16 plain folded channels_last compiled)  # compiled last: a minute or more of compiling
fi

step dataset 90 "" "$py" benchmarks/synthetic_dataset.py --out "$work/dataset" --positions "$positions"
step train 150 "$work/train.json" "$py" benchmarks/train_throughput.py --data "$work/dataset" \
    --config "$train_config" "${train_sizes[@]}" --compare --precision bf16 --json "$work/train.json"
step ddp 150 "ddp:$work/ddp" "$py" train/train.py --data "$work/dataset" --out "$work/ddp" "${ddp_flags[@]}" \
    --devices 1 --strategy ddp --max-minutes 5 --logger csv --no-test --fresh \
    --set trainer.enable_progress_bar=false --set trainer.num_sanity_val_steps=0
for path in "${paths[@]}"; do
    step "selfplay_$path" 180 "$work/selfplay_$path.json" "$py" benchmarks/selfplay.py "${selfplay_flags[@]}" \
        --paths "$path" --json "$work/selfplay_$path.json"
done

record finish "$state" "$out"
status=$?
echo "gpu_check: wrote $out in $(( $(date +%s) - t0 )) s (exit status $status)" >&2
exit "$status"
