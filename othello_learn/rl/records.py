"""The RL run's folder, OUT: where each file of a generation lives, reading the files back
checked (a damaged one is one line naming it and what a rerun does about it), state.json (the
commit point), the seeds, and opening the folder: a new run set up, an existing one checked."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import torch

from othello_learn.files import (NestingError, UserError, describe_os_error, one_line, parse_nested, temp_target,
                                 write_json)
from othello_learn.models.nets import (NetConfig, TrainingCheckpointError, build_network, grow_network, load_network,
                                       save_network)
from othello_learn.rl.selfplay import SelfPlayGames
from othello_learn.rl.settings import DEFAULT_SEARCH, RANDOM_INIT, RunConfig
from othello_learn.run_folder import remove_killed_writes as remove_stale_writes

# What a rerun does with a file we find broken, by the role the file plays.
REPLAYED = "delete it and rerun the same command: that part is played again"
REDONE = "delete it and rerun the same command: this step of the generation is done again"
COMMITTED = "the run cannot go on without it: restore it from a backup, or start a new --out"


def load_games(path: Path, remedy: str) -> SelfPlayGames:
    """The games at ``path``, or a UserError naming the file and what to do:
    a truncated .npz would otherwise surface as a bare zipfile error."""
    try:
        return SelfPlayGames.load(path)
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except (zipfile.BadZipFile, ValueError, EOFError, KeyError, TypeError) as e:
        why = one_line(e)
        if "pickled" in why:  # numpy's advice to unpickle it: never, for a file that is not what we wrote
            why = "not an array file the loop wrote: it would need unpickling"
        raise UserError(f"{path}: unreadable self-play games, truncated or corrupt ({why}): {remedy}") from e


def load_net(path: Path, dev, remedy: str):
    try:
        return load_network(path, map_location=dev)
    except TrainingCheckpointError:
        raise  # its remedy is in it
    except UserError as e:
        raise UserError(f"{e}: {remedy}") from e
    except OSError as e:  # read_checkpoint makes every damaged file a UserError; this is a missing one
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e


def read_json(path: Path, remedy: str, needs: tuple[str, ...] | None = None):
    """``path``'s JSON; with ``needs``, an object holding those keys (a record the loop wrote),
    so a file edited or replaced by hand is one line naming it, not a KeyError generations on."""
    try:
        data = parse_nested(json.loads, path.read_text())
    except OSError as e:
        raise UserError(f"{describe_os_error(e)}: {remedy}") from e
    except NestingError as e:
        raise UserError(f"{path}: {e}: {remedy}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON, truncated or corrupt ({one_line(e)}): {remedy}") from e
    if needs is not None:
        missing = [f"no {k!r}" for k in needs if k not in data] if isinstance(data, dict) else ["not a JSON object"]
        if missing:
            raise UserError(f"{path}: not the record the loop wrote ({missing[0]}): {remedy}")
    return data


STATE_FIELDS = {"generation": int, "best": str, "trainee": str, "elo_best": (int, float), "history": list,
                "wandb_id": str}


# the numbers of a generation's history record that the run reads back (the Elo plot)
HISTORY_NUMBERS = ("elo_best", "gate_score", "elo_candidate", "eval_elo", "eval_score", "eval_games", "eval_elo_low",
                   "eval_elo_high")


def _a_threshold(x) -> bool:
    """A resign threshold as the run files hold it: a finite number, or None (none kept or used)."""
    return x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x))


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
    for key in ("best", "trainee"):  # the run's own nets: publish copies the best over best.pt
        if not re.fullmatch(r"nets/gen_\d{4,}\.pt", state[key]):
            raise UserError(f"{path}: corrupt run state ({key} {state[key]!r} is not one of the run's nets): {remedy}")
    if not all(isinstance(h, dict) for h in state["history"]):
        raise UserError(f"{path}: corrupt run state (a history record is not a JSON object): {remedy}")
    for i, h in enumerate(state["history"], 1):  # what the Elo plot reads, after a whole generation's work
        numbers = [h.get(k) for k in HISTORY_NUMBERS if h.get(k) is not None]
        if (h.get("generation") != i or not isinstance(h.get("promoted"), bool) or "elo_best" not in h
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in numbers)):
            raise UserError(f"{path}: corrupt run state (history record {i} lacks its generation, promotion "
                            f"or Elo, or holds a number that is not one): {remedy}")
    if not math.isfinite(state["elo_best"]):
        raise UserError(f"{path}: corrupt run state (elo_best {state['elo_best']}): {remedy}")
    if not _a_threshold(state.get("resign_threshold", "missing")):
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


def generation_seeds(cfg: RunConfig, gen: int) -> dict:
    """Independent streams for each generation and stage, from --seed alone: a
    resumed stage draws what the killed one would have, and no two stages or
    parts share a stream (as ad-hoc seed arithmetic can)."""
    ss = np.random.SeedSequence(cfg.seed).spawn(gen)[gen - 1]
    self_play, train, gate, evaluate = ss.spawn(4)
    parts = -(-cfg.games // cfg.parallel)

    def to_int(s):
        return int(s.generate_state(1, np.uint32)[0])
    return {"self_play": [to_int(s) for s in self_play.spawn(parts)], "train": to_int(train), "gate": to_int(gate),
            "eval": to_int(evaluate)}


def initial_network(cfg: RunConfig):
    if cfg.init == "random":
        torch.manual_seed(cfg.seed)
        hp = {**RANDOM_INIT, "blocks": cfg.arch_blocks, "width": cfg.arch_width, "encoder": cfg.arch_encoder}
        try:
            config = NetConfig(**hp)
        except ValueError as e:  # both sizes within their limits, too large together
            raise UserError(f"--arch-blocks {cfg.arch_blocks} --arch-width {cfg.arch_width}: {e}") from None
        return build_network(config).eval()
    net = load_net(Path(cfg.init), "cpu",
                   "give an exported network (checkpoints/best_value.pt, a training run's model.pt), or --init random")
    if getattr(net, "value_head", None) is None:
        raise UserError(f"--init {cfg.init}: self-play needs a network with a value head "
                        "(checkpoints/best_value.pt, or train one with arch: resnet, value_head: true: "
                        "train/configs/cpu_value_fast.yaml on a CPU, resnet_best.yaml on a GPU)")
    if cfg.grow_blocks or cfg.grow_width:
        try:
            grown = dataclasses.replace(net.config, blocks=net.config.blocks + cfg.grow_blocks,
                                        width=net.config.width + cfg.grow_width)
        except ValueError as e:  # grown past nets.SIZE_LIMITS
            raise UserError(f"--grow-blocks {cfg.grow_blocks} / --grow-width {cfg.grow_width} on --init {cfg.init}: "
                            f"the grown network's {e}") from None
        net = grow_network(net, grown, where=f"--init {cfg.init}").eval()
    return net


# The files the loop writes under OUT that are not a generation's (_paths names those).
RUN_TOP_FILES = ("config.json", "state.json", "best.pt", "elo.png")
# What setting up a new run writes (open_run, publish), taken back if it is refused before its
# first generation.
NEW_RUN_FILES = (*RUN_TOP_FILES, "nets/gen_0000.pt")


def _is_run_file(name: str) -> bool:
    """Whether ``name`` is one the loop writes, so atomic_path's temporary copies of it are
    ours to remove. A generation's names are derived from _gen_paths, so a new kind of
    generation file is covered; the top-level names and _part_paths' are restated here."""
    if name in RUN_TOP_FILES or re.fullmatch(r"part_\d{3,}\.npz", name):
        return True
    m = re.match(r"gen_(\d{4,})", name)
    return bool(m) and name in {p.name for k, p in _gen_paths(Path(), int(m[1])).items() if k not in ("tag", "parts")}


def remove_killed_writes(out: Path) -> None:
    """The temporary files a run killed outright left mid-write, removed on resume: a parts
    folder holding one would never be removed. Called with the run's lock held."""
    folders = [out, out / "nets", out / "stats", out / "games"]
    if (out / "games").is_dir():
        folders += sorted(p for p in (out / "games").iterdir() if p.is_dir() and re.fullmatch(r"gen_\d{4,}", p.name))
    remove_stale_writes(out, [(folder, _is_run_file) for folder in folders])


def open_run(cfg: RunConfig) -> dict:
    """The run's state: a new run folder set up, or an existing one checked
    (same run settings, a readable commit point) before anything is written.
    Settings left unset (None) take the run's own value."""
    out = cfg.out
    for name in RUN_TOP_FILES:  # found now, not after a generation's hour of self-play
        if (out / name).is_dir():
            raise UserError(f"{out / name}: a folder, where the run writes a file: move it, or use another --out")
    for name in ("nets", "stats", "games"):
        if (out / name).exists() and not (out / name).is_dir():
            raise UserError(f"{out / name}: a file, where the run keeps a folder: move it, or use another --out")
    cfg_path, state_path = out / "config.json", out / "state.json"
    if cfg_path.exists():
        saved = read_json(cfg_path, "it records the run's settings: restore it from a backup, or start a new --out")
        if not isinstance(saved, dict):
            raise UserError(f"{cfg_path}: corrupt run settings (not a JSON object): restore it, or start a new --out")
        unknown = sorted(set(saved) - {f.name for f in dataclasses.fields(RunConfig)})
        if unknown:  # a hand edit's typo, or a newer version's setting: said, since it changes nothing here
            print(f"warning: {cfg_path}: {', '.join(map(repr, unknown))} "
                  f"{'is no setting' if len(unknown) == 1 else 'are no settings'} of this version of the loop "
                  "(ignored)", file=sys.stderr)
        try:
            saved = RunConfig.from_json(saved)
            saved.check_values()  # a hand edit: "search": "xyz" ran PUCT without a word
        except (TypeError, UserError) as e:
            raise UserError(f"{cfg_path}: corrupt run settings ({one_line(e)}): restore it, or start a new --out")
        for f in dataclasses.fields(cfg):
            if getattr(cfg, f.name) is None and not f.metadata["resumable"]:
                setattr(cfg, f.name, getattr(saved, f.name))
        _check_gumbel_only(cfg, resumed=cfg.search == saved.search)
        changed = cfg.fixed_changes(saved)
        if changed:
            raise UserError(f"{out} was started with different {', '.join(changed)} "
                            f"({', '.join(f'{k}={getattr(saved, k)!r}' for k in changed)}): rerun with those, "
                            "or use another --out")
        if state_path.exists():
            return read_state(state_path)
        if (out / "games").exists() or (out / "stats").exists():
            raise UserError(f"{state_path} is missing, but {out} holds generations already: restore state.json "
                            "from a backup, or start a new --out")
    elif state_path.exists() or (out / "games").exists() or (out / "stats").exists():
        raise UserError(f"{cfg_path} is missing, but {out} holds a loop run: restore config.json from a "
                        "backup, or start a new --out")
    # (A first config.json cut short by a kill leaves its temporary copy: the folder is still a new
    # run's, and remove_killed_writes clears the copy.)
    elif out.is_dir() and any(p.name != ".lock" and not _is_run_file(temp_target(p.name) or "")
                              for p in out.iterdir()):
        raise UserError(f"--out {out}: the folder is not empty and holds no loop run (no config.json): "
                        "give a new or empty folder")
    # A new run (or one killed before its first commit): the initial network
    # is checked before the first file is written.
    net = initial_network(cfg)
    if cfg.search is None:
        cfg.search = DEFAULT_SEARCH
    _check_gumbel_only(cfg)
    if cfg.init != "random":  # saved absolute: a resume from another folder finds the same file
        cfg.init = os.path.abspath(cfg.init)
    if not cfg_path.exists():
        write_json(cfg_path, cfg.to_json())
    save_network(net, out / "nets" / "gen_0000.pt")
    state = {"generation": 0, "best": "nets/gen_0000.pt", "trainee": "nets/gen_0000.pt", "elo_best": 0.0,
             "resign_threshold": cfg.resign_threshold, "history": [],
             "wandb_id": f"rl-{int(time.time())}-{os.getpid()}"}
    write_json(state_path, state)
    return state


def _check_gumbel_only(cfg: RunConfig, resumed: bool = False) -> None:
    """The Gumbel settings, given to a PUCT run, would be ignored in silence. A resumed run keeps
    the search it started with, so there the remedy is to drop the setting."""
    remedy = ("drop {flag} (a resumed run keeps the search it started with)" if resumed
              else "add --search gumbel")
    if cfg.policy_target != "rescaled" and cfg.search != "gumbel":
        raise UserError(f"--policy-target {cfg.policy_target} sets Gumbel search's improved-policy target, and this "
                        f"run searches with {cfg.search} (its target is the visit counts): "
                        + remedy.format(flag="--policy-target"))
    if cfg.gumbel_considered and cfg.search != "gumbel":
        raise UserError(f"--gumbel-considered {cfg.gumbel_considered} sets how many root moves Gumbel search samples, "
                        f"and this run searches with {cfg.search}: " + remedy.format(flag="--gumbel-considered"))


def _paths(cfg: RunConfig, gen: int) -> dict:
    return _gen_paths(cfg.out, gen)


def _gen_paths(out: Path, gen: int) -> dict:
    tag = f"gen_{gen:04d}"
    return {"tag": tag, "games": out / "games" / f"{tag}.npz", "parts": out / "games" / tag,
            "self_play": out / "stats" / f"{tag}_selfplay.json", "net": out / "nets" / f"{tag}.pt",
            "train": out / "stats" / f"{tag}_train.json", "train_state": out / "nets" / f"{tag}.training",
            "optimizer": out / "nets" / f"{tag}.adam",
            "gate": out / "stats" / f"{tag}_gate.json",
            "record": out / "stats" / f"{tag}.json"}




def _part_paths(cfg: RunConfig, p: dict) -> list[Path]:
    """A generation's self-play parts, ``--parallel`` games each: the only files its clean-up deletes."""
    return [p["parts"] / f"part_{k:03d}.npz" for k in range(len(range(0, cfg.games, cfg.parallel)))]


def _window_paths(cfg: RunConfig, gen: int) -> list[Path]:
    """The committed generations' games that generation ``gen`` trains on beside its own."""
    return [cfg.out / "games" / f"gen_{i:04d}.npz" for i in range(max(1, gen - cfg.window + 1), gen)]
