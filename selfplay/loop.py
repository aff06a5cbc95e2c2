"""The AlphaZero loop: self-play, training on a replay window, gating.

    python selfplay/loop.py --init checkpoints/resnet.pt --out runs/rl --generations 20
    python selfplay/loop.py --init random --out runs/rl_scratch --generations 20

Each generation: the best network plays ``--games`` self-play games (batched
MCTS), the trainee network trains on the last ``--window`` generations of
games, and a match against the best network decides whether it becomes the
best (score above ``--gate-threshold``; ``--continuous`` promotes always).
Everything a generation writes goes under OUT atomically (temporary file,
then rename), self-play in parts, so the process can be killed at any moment:
rerunning the same command resumes where it stopped, without losing or
repeating a game; Ctrl-C says which generation the rerun resumes from.
Per-generation statistics go to OUT/stats, W&B (offline by default) and
OUT/elo.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import sys
import time
import zipfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from models.encoders import ENCODERS  # noqa: E402
from models.nets import build_network, export, load_network  # noqa: E402
from othello.files import UserError, atomic_path, atomic_write, describe_os_error, run_main  # noqa: E402
from selfplay.arena import play_match  # noqa: E402
from selfplay.learner import train_network  # noqa: E402
from selfplay.gumbel import GumbelConfig  # noqa: E402
from selfplay.mcts import Evaluator, MCTSConfig  # noqa: E402
from selfplay.nn_players import PolicyPlayer, search_player  # noqa: E402
from selfplay.players import make_player  # noqa: E402
from selfplay.selfplay import SelfPlayConfig, SelfPlayGames, calibrate_resign_threshold, false_resign_rate, play_games  # noqa: E402

RANDOM_INIT = {"arch": "resnet", "encoder": "raw", "blocks": 6, "width": 64, "value_head": True}
# Settings that define a run: a resumed run must not change them.
# (--parallel too: it splits a generation's games into parts, so a change
# mid-generation would replay or skip games.)
FIXED = ("init", "games", "parallel", "simulations", "window", "train_steps", "batch_size", "seed", "continuous", "arch_blocks",
         "arch_width", "arch_encoder", "search")
DEFAULT_SEARCH = "puct"  # for a new run
SAVED_DEFAULTS = {"search": "puct"}  # what a run folder saved before the setting existed used


def write_json(path: Path, obj) -> None:
    atomic_write(path, json.dumps(obj, indent=2) + "\n")


def save_net(net, path: Path, **extra) -> None:
    with atomic_path(path) as tmp:
        export(net, net.hparams, tmp, **extra)


def save_games(games: SelfPlayGames, path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        games.save(f)


# What a rerun does with a file we find broken, by the role the file plays.
REPLAYED = "delete it and rerun the same command: that part is played again"
REDONE = "delete it and rerun the same command: this step of the generation is done again"
COMMITTED = "the run cannot go on without it: restore it from a backup, or start a new --out"


def _one_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def load_games(path: Path, remedy: str) -> SelfPlayGames:
    """The games at ``path``, or a UserError naming the file and what to do:
    a truncated .npz would otherwise surface as a bare zipfile error."""
    try:
        return SelfPlayGames.load(path)
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except (zipfile.BadZipFile, ValueError, EOFError, KeyError, TypeError) as e:
        raise UserError(f"{path}: unreadable self-play games, truncated or corrupt ({_one_line(e)}): {remedy}") from e


def load_net(path: Path, dev, remedy: str):
    try:
        return load_network(path, map_location=dev)
    except UserError as e:
        raise UserError(f"{e}: {remedy}") from e
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except (RuntimeError, EOFError, pickle.UnpicklingError, ValueError, KeyError) as e:
        raise UserError(f"{path}: unreadable network, truncated or corrupt ({_one_line(e)}): {remedy}") from e


def read_json(path: Path, remedy: str):
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON, truncated or corrupt ({_one_line(e)}): {remedy}") from e


STATE_FIELDS = {"generation": int, "best": str, "trainee": str, "elo_best": (int, float), "history": list,
                "wandb_id": str}


def read_state(path: Path) -> dict:
    """The run's commit point, checked: a state that does not hold together would
    otherwise fail generations later, or silently train the wrong network."""
    remedy = "it is the run's commit point: restore it from a backup, or start a new --out"
    state = read_json(path, remedy)
    if not isinstance(state, dict):
        raise UserError(f"{path}: corrupt run state (not a JSON object): {remedy}")
    for key, kind in STATE_FIELDS.items():
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise UserError(f"{path}: corrupt run state (no valid {key!r}): {remedy}")
    threshold = state.get("resign_threshold", "missing")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise UserError(f"{path}: corrupt run state (no valid 'resign_threshold'): {remedy}")
    if state["generation"] < 0 or len(state["history"]) != state["generation"]:
        raise UserError(f"{path}: corrupt run state (generation {state['generation']} with "
                        f"{len(state['history'])} history records): {remedy}")
    return state


def committed_generation(out: Path) -> int:
    """The last generation state.json commits, 0 when there is none (yet)."""
    try:
        return read_state(out / "state.json")["generation"]
    except UserError:
        return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--init", required=True, help="supervised checkpoint with a value head (model.pt / .ckpt), or 'random'")
    ap.add_argument("--out", type=Path, required=True, help="run folder (resumed if it exists)")
    ap.add_argument("--generations", type=int, default=10, help="run until this many generations are done")
    ap.add_argument("--games", type=int, default=2048, help="self-play games per generation")
    ap.add_argument("--parallel", type=int, default=512, help="games played at once (one part file each)")
    ap.add_argument("--simulations", type=int, default=100, help="MCTS simulations per move in self-play")
    ap.add_argument("--search", choices=["puct", "gumbel"], default=None,
                    help=f"self-play and gating search (default: the run's own; {DEFAULT_SEARCH} for a new run). "
                         "gumbel: Gumbel AlphaZero, the policy target is the improved policy")
    ap.add_argument("--gumbel-considered", type=int, default=16, help="root actions sampled by Gumbel-top-k")
    ap.add_argument("--c-puct", type=float, default=1.5)
    ap.add_argument("--dirichlet-weight", type=float, default=0.25)
    ap.add_argument("--dirichlet-alpha-scale", type=float, default=10.0, help="alpha = this / number of legal moves")
    ap.add_argument("--temperature-plies", type=int, default=12, help="plies played by visit-count sampling")
    ap.add_argument("--no-tree-reuse", action="store_true")
    ap.add_argument("--resign-threshold", type=float, default=-0.9, help="initial threshold (calibrated each generation)")
    ap.add_argument("--no-resign", action="store_true", help="never resign")
    ap.add_argument("--no-resign-fraction", type=float, default=0.1, help="share of games always played out")
    ap.add_argument("--window", type=int, default=4, help="generations of games in the replay window")
    ap.add_argument("--train-steps", type=int, default=1000, help="training steps per generation")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--l2", type=float, default=1e-4)
    ap.add_argument("--gate-games", type=int, default=200, help="games of the gating match")
    ap.add_argument("--gate-simulations", type=int, default=50, help="simulations per move in gating matches")
    ap.add_argument("--gate-threshold", type=float, default=0.55)
    ap.add_argument("--continuous", action="store_true", help="no gating: the trainee is always the best")
    ap.add_argument("--eval-vs", default=None, help="also play the best network (1-ply policy) against this spec each generation")
    ap.add_argument("--eval-games", type=int, default=100)
    ap.add_argument("--arch-blocks", type=int, default=RANDOM_INIT["blocks"], help="with --init random")
    ap.add_argument("--arch-width", type=int, default=RANDOM_INIT["width"], help="with --init random")
    ap.add_argument("--arch-encoder", default=RANDOM_INIT["encoder"], help="with --init random")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logger", choices=["wandb", "none"], default="wandb")
    ap.add_argument("--wandb-online", action="store_true")
    ap.add_argument("--wandb-project", default="othello-learn-rl")
    ap.add_argument("--quiet", action="store_true")
    return ap.parse_args(argv)


# flag: (lowest, highest, the lowest is allowed); None = unbounded on that side.
LIMITS = {
    "generations": (1, None, True), "games": (1, None, True), "parallel": (1, None, True),
    "simulations": (1, None, True), "gumbel_considered": (1, None, True), "c_puct": (0, None, False), "dirichlet_weight": (0, 1, True),
    "dirichlet_alpha_scale": (0, None, False), "temperature_plies": (0, None, True),
    "resign_threshold": (-1, 1, True), "no_resign_fraction": (0, 1, True), "window": (1, None, True),
    "train_steps": (1, None, True), "batch_size": (1, None, True), "lr": (0, None, False), "l2": (0, None, True),
    "gate_games": (1, None, True), "gate_simulations": (1, None, True), "gate_threshold": (0, 1, True),
    "eval_games": (1, None, True), "arch_blocks": (1, None, True), "arch_width": (1, None, True),
    "seed": (0, None, True),
}


def check_settings(args) -> None:
    """Refuse any setting that would hang (``--simulations 0``), crash later or
    train on nonsense, before anything is loaded, played or written."""
    for key, (low, high, low_ok) in LIMITS.items():
        v = getattr(args, key)
        flag = "--" + key.replace("_", "-")
        if not math.isfinite(v) or (v < low if low_ok else v <= low) or (high is not None and v > high):
            if high is not None:
                want = f"between {low} and {high}"
            else:
                want = f"at least {low}" if low_ok else f"more than {low}"
            raise UserError(f"{flag} must be {want}, got {v}")
    if args.arch_encoder not in ENCODERS:
        raise UserError(f"--arch-encoder must be one of {', '.join(sorted(ENCODERS))}, got {args.arch_encoder!r}")
    try:
        torch.device(args.device)
    except RuntimeError as e:
        raise UserError(f"--device {args.device}: {_one_line(e)}") from e
    if args.init != "random" and not Path(args.init).is_file():
        raise UserError(f"--init {args.init}: no such checkpoint file (or give 'random')")


def initial_network(args):
    if args.init == "random":
        torch.manual_seed(args.seed)
        hp = {**RANDOM_INIT, "blocks": args.arch_blocks, "width": args.arch_width, "encoder": args.arch_encoder}
        net = build_network(**hp)
        net.hparams = hp
        return net.eval()
    net = load_net(Path(args.init), "cpu", "give a checkpoint written by train/train.py, or --init random")
    if getattr(net, "value_head", None) is None:
        raise UserError(f"--init {args.init}: self-play needs a network with a value head "
                        "(train one with arch: resnet, value_head: true, e.g. train/configs/resnet_best.yaml)")
    return net


class Logger:
    def __init__(self, args, state, out: Path):
        self.run = None
        if args.logger != "wandb":
            return
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        self.run = wandb.init(project=args.wandb_project, dir=str(out), id=state["wandb_id"], resume="allow",
                              mode="online" if args.wandb_online else "offline", config=vars(args) | {"out": str(out)},
                              name=out.name)

    def log(self, metrics: dict, step: int) -> None:
        if self.run is not None:
            self.run.log(metrics, step=step)

    def finish(self):
        if self.run is not None:
            self.run.finish()


def plot_elo(history: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gens = [h["generation"] for h in history]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([0] + gens, [0.0] + [h["elo_best"] for h in history], "o-", label="best network")
    ax.plot(gens, [h["elo_candidate"] for h in history], "x", color="gray", label="candidate (gating match)")
    promoted = [h for h in history if h["promoted"]]
    ax.plot([h["generation"] for h in promoted], [h["elo_best"] for h in promoted], "o", color="green", label="promoted")
    ax.set_xlabel("generation")
    ax.set_ylabel("Elo (relative to the initial network)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        run(args)
    except KeyboardInterrupt:
        # Everything is written atomically, so the rerun finds only whole files.
        g = min(committed_generation(args.out) + 1, args.generations)
        print(f"{Path(sys.argv[0]).name}: interrupted; rerun the same command to resume from generation {g}",
              file=sys.stderr)
        return 130
    return 0


def open_run(args) -> dict:
    """The run's state: a new run folder set up, or an existing one checked
    (same run settings, a readable commit point) before anything is written."""
    out: Path = args.out
    cfg_path, state_path = out / "config.json", out / "state.json"
    if cfg_path.exists():
        saved = read_json(cfg_path, "it records the run's settings: restore it from a backup, or start a new --out")
        if not isinstance(saved, dict):
            raise UserError(f"{cfg_path}: corrupt run settings (not a JSON object): restore it, or start a new --out")
        if args.search is None:
            args.search = saved.get("search", SAVED_DEFAULTS["search"])
        saved = {**SAVED_DEFAULTS, **saved}
        changed = [k for k in FIXED if saved.get(k) != vars(args)[k]]
        if changed:
            raise UserError(f"{out} was started with different {', '.join(changed)} "
                            f"({', '.join(f'{k}={saved.get(k)!r}' for k in changed)}): rerun with those, "
                            "or use another --out")
        if state_path.exists():
            return read_state(state_path)
        if (out / "games").exists() or (out / "stats").exists():
            raise UserError(f"{state_path} is missing, but {out} holds generations already: restore state.json "
                            "from a backup, or start a new --out")
    elif out.is_dir() and any(out.iterdir()):
        raise UserError(f"--out {out}: the folder is not empty and holds no loop run (no config.json): "
                        "give a new or empty folder")
    # A new run (or one killed before its first commit): the initial network
    # is checked before the first file is written.
    net = initial_network(args)
    if args.search is None:
        args.search = DEFAULT_SEARCH
    if not cfg_path.exists():
        write_json(cfg_path, {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()})
    save_net(net, out / "nets" / "gen_0000.pt")
    state = {"generation": 0, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0000.pt", "elo_best": 0.0,
             "resign_threshold": None if args.no_resign else args.resign_threshold, "history": [],
             "wandb_id": f"rl-{int(time.time())}-{os.getpid()}"}
    write_json(state_path, state)
    return state


def run(args) -> dict:
    """Play, train and gate generations until ``--generations`` are done; the final state."""
    check_settings(args)
    eval_vs = None
    if args.eval_vs:
        try:
            eval_vs = make_player(args.eval_vs)
        except UserError as e:
            raise UserError(f"--eval-vs: {e}") from e
    state = open_run(args)
    out: Path = args.out
    log = Logger(args, state, out)
    try:
        state = _generations(args, state, out, log, eval_vs)
    finally:
        log.finish()
    best_final = out / "best.pt"
    atomic_write(best_final, (out / state["best"]).read_bytes())
    return state


def _generations(args, state: dict, out: Path, log: "Logger", eval_vs) -> dict:
    state_path = out / "state.json"
    dev = torch.device(args.device)
    mcts = MCTSConfig(simulations=args.simulations, c_puct=args.c_puct, dirichlet_weight=args.dirichlet_weight,
                      dirichlet_alpha_scale=args.dirichlet_alpha_scale, reuse_tree=not args.no_tree_reuse)
    if args.search == "gumbel":
        mcts = GumbelConfig(simulations=args.simulations, max_considered=args.gumbel_considered)

    while state["generation"] < args.generations:
        g = state["generation"] + 1
        tag = f"gen_{g:04d}"
        print(f"generation {g}: best {state['best']}, resign threshold {state['resign_threshold']}", file=sys.stderr)
        best = load_net(out / state["best"], dev, COMMITTED).to(dev)

        # 1. Self-play, in parts: a part on disk is never replayed.
        games_path = out / "games" / f"{tag}.npz"
        parts_dir = out / "games" / tag
        t0 = time.time()
        if not games_path.exists():
            parts = []
            sp = SelfPlayConfig(temperature_plies=args.temperature_plies, resign_threshold=state["resign_threshold"],
                                no_resign_fraction=args.no_resign_fraction)
            ev = Evaluator(best, dev)
            for k, start in enumerate(range(0, args.games, args.parallel)):
                part = parts_dir / f"part_{k:03d}.npz"
                if not part.exists():
                    n = min(args.parallel, args.games - start)
                    save_games(play_games(ev, n, mcts, sp, seed=args.seed * 1_000_003 + g * 1009 + k,
                                          progress=not args.quiet), part)
                parts.append(load_games(part, REPLAYED))
            save_games(SelfPlayGames.concat(parts), games_path)
        if parts_dir.exists():  # our parts, now in games_path (also after a kill during this clean-up)
            for part in parts_dir.glob("part_[0-9][0-9][0-9].npz"):
                part.unlink(missing_ok=True)
            try:
                parts_dir.rmdir()
            except OSError:  # something we did not write is in there: leave it
                pass
        selfplay_seconds = time.time() - t0
        games = load_games(games_path, f"delete it and rerun the same command: generation {g}'s self-play is played again")

        # 2. Train the trainee on the replay window.
        cand_path = out / "nets" / f"{tag}.pt"
        t0 = time.time()
        train_stats_path = out / "stats" / f"{tag}_train.json"
        if not cand_path.exists() or not train_stats_path.exists():
            window = [load_games(out / "games" / f"gen_{i:04d}.npz", COMMITTED)
                      for i in range(max(1, g - args.window + 1), g)] + [games]
            trainee = load_net(out / state["trainee"], dev, COMMITTED).to(dev)
            stats = train_network(trainee, SelfPlayGames.concat(window), args.train_steps, args.batch_size, args.lr,
                                  args.l2, dev, seed=args.seed * 7919 + g, progress=not args.quiet)
            stats["window_positions"] = int(sum(len(w.player) for w in window))
            save_net(trainee.cpu(), cand_path, generation=g)
            write_json(train_stats_path, stats)
        train_stats = read_json(train_stats_path, REDONE)
        train_seconds = time.time() - t0

        # 3. Gate against the best network.
        gate_path = out / "stats" / f"{tag}_gate.json"
        if not gate_path.exists():
            cand = load_net(cand_path, dev, REDONE)
            if args.continuous:
                gate = {"games": 0, "score": None, "elo": 0.0, "elo_low": None, "elo_high": None}
            else:
                a = search_player(args.search, cand, args.gate_simulations, dev)
                b = search_player(args.search, best, args.gate_simulations, dev)
                a.name, b.name = tag, state["best"]
                r = play_match(a, b, args.gate_games, seed=args.seed + g, progress=not args.quiet)
                elo, lo, hi = r.elo()
                gate = {"games": r.games, "wins": r.wins, "draws": r.draws, "losses": r.losses, "score": r.score,
                        "elo": _finite(elo), "elo_low": _finite(lo), "elo_high": _finite(hi)}
            if eval_vs is not None:
                r = play_match(PolicyPlayer(cand, dev), eval_vs, args.eval_games, seed=g, progress=not args.quiet)
                gate["eval_vs"] = {"spec": args.eval_vs, "score": r.score, "elo": _finite(r.elo()[0])}
            write_json(gate_path, gate)
        gate = read_json(gate_path, REDONE)

        # 4. Promote, recalibrate, record: state.json is the commit point.
        promoted = args.continuous or (gate["score"] is not None and gate["score"] > args.gate_threshold)
        elo_gain = gate["elo"]
        if elo_gain is None and gate["score"] is not None:  # a clean sweep: its finite (inner) bound
            elo_gain = gate["elo_low"] if gate["score"] >= 0.5 else gate["elo_high"]
        elo_candidate = state["elo_best"] + (elo_gain or 0.0)
        frr, n_low = false_resign_rate(games, state["resign_threshold"]) if state["resign_threshold"] is not None else (0.0, 0)
        threshold = state["resign_threshold"]
        if threshold is not None:
            threshold = calibrate_resign_threshold(games, 0.05, threshold)
        n = len(games.winner)
        record = {
            "generation": g,
            "games": n,
            "positions": int(len(games.player)),
            "black_wins": float((games.winner > 0).mean()),
            "white_wins": float((games.winner < 0).mean()),
            "draws": float((games.winner == 0).mean()),
            "resigned": float(games.resigned.mean()),
            "mean_length": float(games.length.mean()),
            "resign_threshold": state["resign_threshold"],
            "false_resign_rate": frr,
            "false_resign_sample": n_low,
            "games_per_hour": n / max(selfplay_seconds, 1e-9) * 3600 if selfplay_seconds > 1 else None,
            "train_seconds": train_seconds,
            **{f"train_{k}": v for k, v in train_stats.items()},
            "gate_score": gate["score"],
            "gate_elo": gate["elo"],
            "elo_candidate": elo_candidate,
            "promoted": bool(promoted),
            "elo_best": elo_candidate if promoted else state["elo_best"],
        }
        if "eval_vs" in gate:
            record["eval_score"] = gate["eval_vs"]["score"]
        write_json(out / "stats" / f"{tag}.json", record)
        state = {**state, "generation": g, "trainee": f"nets/{tag}.pt",
                 "best": f"nets/{tag}.pt" if promoted else state["best"], "elo_best": record["elo_best"],
                 "resign_threshold": threshold, "history": state["history"] + [record]}
        write_json(state_path, state)
        log.log({k: v for k, v in record.items() if isinstance(v, (int, float)) and v is not None}, step=g)
        plot_elo(state["history"], out / "elo.png")
        print(f"generation {g}: {n} games ({record['black_wins']:.0%} black wins, {record['resigned']:.0%} resigned), "
              f"gate score {gate['score']}, {'promoted' if promoted else 'kept best'}; Elo {record['elo_best']:+.0f}",
              file=sys.stderr)
    return state


def _finite(x):
    return None if x is None or not np.isfinite(x) else float(x)


if __name__ == "__main__":
    sys.exit(run_main(main))
