"""`famiglia` — the command line of the embedded stack.

    famiglia run [--size quick|normal|long]   start the stack and play the main job
    famiglia up | down | status               manage the embedded stack
    famiglia play GAME --seats N --matches K  random matches over gRPC

Every address (`--address`, FAMIGLIA_<SERVICE>_ADDR) is HOST:PORT, dialled in plaintext, or
grpcs://HOST[:PORT] (TLS, port 443 by default), trusting the system's roots or the PEM CA file
FAMIGLIA_TLS_CA, and showing FAMIGLIA_TLS_CLIENT_CERT/KEY to a server that asks for a client certificate.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from famiglia.cli import add_column, add_plain_row
from famiglia.client import GameClient
from famiglia.config import Settings
from famiglia.grpcutil.errors import error_code
from famiglia.grpcutil.tls import exit_on_bad_setting
from famiglia.localstack.stack import Stack, default_services, service_modules

from .play import PlayedMatch, play_match

console = Console()

SIZES = {"quick": 2, "normal": 4, "long": 20}
PLUGINS = ("tournament", "match", "replay", "matchmaking", "projection")


def cmd_up(args: argparse.Namespace) -> int:
    Stack().up(log=console.print)
    console.print("[green]embedded stack is up[/]; `make down` stops it")
    return 0


def _recorded_stack() -> tuple[Stack, str]:
    """The stack var/stack.json records, for `down` and `status`: they go by its pids and need no
    port, so a bad FAMIGLIA_REDIS_PORT or FAMIGLIA_*_ADDR (set since `up`, or in this shell only)
    must not keep them from the processes `up` started. With the setting's one-line error, which
    they show once done ("" when every address reads)."""
    try:
        stack = Stack()
    except SystemExit as exc:  # FAMIGLIA_REDIS_PORT: the recorded stack's redis-server is in its pids
        return Stack(redis_port=0), f"{exc.code} (`make up` refuses it)"
    try:
        default_services()
    except SystemExit as exc:
        return stack, f"{exc.code} (`make up` refuses it)"
    return stack, ""


def cmd_down(args: argparse.Namespace) -> int:
    stack, bad_setting = _recorded_stack()
    if not stack.running():
        console.print(f"no embedded stack is running (none recorded in {escape(str(stack.state_file))})")
    stack.down(log=console.print)
    if bad_setting:
        console.print(f"[red]{escape(bad_setting)}[/]", soft_wrap=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Every process of the stack, running or not: 0 when all run or none does, 1 when only some do
    (a crashed service: `make up` starts what is missing)."""
    stack, bad_setting = _recorded_stack()
    if bad_setting:
        console.print(f"[red]{escape(bad_setting)}[/]", soft_wrap=True)
    running = stack.running()
    if not running:
        recorded = stack.read_state().get("pids")
        console.print("embedded stack is not running"
                      + (f" (the processes recorded in {escape(str(stack.state_file))} are gone)" if recorded
                         else f" (none recorded in {escape(str(stack.state_file))})"))
        return 0
    missing = 0
    for name in ("redis", *service_modules()):
        if name in running:
            console.print(f"{name:<14} pid {running[name]}")
        else:
            missing += 1
            log = stack.var / "redis" / "redis.log" if name == "redis" else stack.var / "logs" / f"{name}.log"
            console.print(f"{name:<14} [red]not running[/] (see {escape(str(log))}; `make up` starts it)", soft_wrap=True)
    return 1 if missing else 0


def _games(client: GameClient, only: list[str] | None):
    games = client.list_games()
    return [g for g in games if not only or g.game_id in only]


def play_matches(client: GameClient, plan: list[tuple[str, int]], *, seed: int, workers: int = 4
                 ) -> list[PlayedMatch]:
    """Play every (game, seats) of the plan with random seats, with live progress."""
    results: list[PlayedMatch] = []
    by_game: dict[str, int] = {}
    for game_id, _ in plan:
        by_game[game_id] = by_game.get(game_id, 0) + 1
    started = time.perf_counter()
    commands = [0]
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console,
                  transient=False) as progress:
        tasks = {g: progress.add_task(escape(g), total=n, rate="") for g, n in by_game.items()}

        def on_command() -> None:
            commands[0] += 1

        stop = threading.Event()

        def one(i: int, game_id: str, seats: int) -> PlayedMatch:
            return play_match(client, game_id, seats, rng=random.Random(seed * 1000 + i), on_command=on_command,
                              stop=stop)

        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            futures = {pool.submit(one, i, g, s): g for i, (g, s) in enumerate(plan)}
            pending = set(futures)
            while pending:
                done = {f for f in pending if f.done()}
                for f in done:
                    results.append(f.result())
                    progress.advance(tasks[futures[f]])
                pending -= done
                rate = commands[0] / max(1e-9, time.perf_counter() - started)
                for t in tasks.values():
                    progress.update(t, rate=f"{rate:,.0f} moves/s")
                time.sleep(0.1)
        finally:
            # Ctrl-C, or a match's failure (a server gone): the matches in play stop at their next
            # command and the rest never start. Waiting for every planned match to be played out
            # kept a Ctrl-C (or the error) unanswered for minutes.
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
    return results


def results_table(results: list[PlayedMatch]) -> Table:
    table = Table(title="Matches played")
    for col in ("game", "match id", "seats", "moves", "winner(s)", "scores", "time"):
        add_column(table, col, no_wrap=col in ("seats", "moves", "time"))
    for r in sorted(results, key=lambda r: (r.game_id, r.match_id)):
        winners = scores = ""
        if r.result is not None:
            winners = ", ".join(f"seat {s.seat}" for s in r.result.seats if s.rank == 1)
            scores = " ".join(f"{s.score:g}" for s in sorted(r.result.seats, key=lambda s: s.seat))
        add_plain_row(table, r.game_id, r.match_id, str(r.seats), str(r.commands), winners, scores, f"{r.seconds:.1f}s")
    return table


def cmd_play(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    client = GameClient(args.address or settings.command_addr)
    client.wait_ready()
    games = _games(client, [args.game] if args.game else None)
    if not games:
        console.print(f"[red]unknown game[/] {escape(repr(args.game))}; this server plays "
                      + escape(", ".join(g.game_id for g in client.list_games())))
        return 2
    plan = []
    for g in games:
        for i in range(args.matches):
            seats = args.seats or (g.min_players + i % (g.max_players - g.min_players + 1))
            plan.append((g.game_id, seats))
    results = play_matches(client, plan, seed=args.seed, workers=args.workers)
    console.print(results_table(results))
    return 0


class Stopped(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout make run`) or SIGHUP (the terminal closed), unwound like Ctrl-C:
    by default either ends the process at once, and a run's `finally` never takes down the stack
    it started (redis-server and every service kept running in the background)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Stopped(signum)

    # A signal the parent ignores stays ignored: `nohup make run &` is meant to outlive its terminal.
    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)
           if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Taking the stack down is not cut short by a second Ctrl-C (it takes a few seconds, and
    stopped halfway it leaves redis-server running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _take_down(stack: Stack, failed: bool) -> None:
    with _shielded():
        if failed:
            with contextlib.suppress(OSError):  # a closed terminal
                console.print("stopping the embedded stack…")
        stack.down(log=lambda *_: None)


def cmd_run(args: argparse.Namespace) -> int:
    """The main job on the embedded default: stack up, then every game played to the end."""
    stack = Stack()
    console.rule("[bold]famiglia[/] — embedded stack")
    ours = not stack.running()  # a stack someone started with `make up` is left running
    if not ours:
        console.print("the embedded stack is already up: playing on it, and leaving it up")
        # left up as with --keep-up: the main job's closing hint must not say to start it again
        args = argparse.Namespace(**{**vars(args), "keep_up": True})
    try:
        stack.up(log=console.print)
    except BaseException:
        if ours and not args.keep_up:  # a service that would not start: what did start must not linger
            _take_down(stack, failed=True)
        raise
    try:
        main_job = importlib.import_module("famiglia.cli.tournament").run_main_job
    except (ModuleNotFoundError, AttributeError):
        main_job = _random_main_job
    failed = True
    try:
        code = int(main_job(args, console) or 0)
        failed = False
        return code
    finally:
        if ours and not args.keep_up:
            _take_down(stack, failed)


def _random_main_job(args: argparse.Namespace, console: Console) -> int:
    """Before the bots service exists: random seats over gRPC for every game."""
    settings = Settings.from_env()
    client = GameClient(settings.command_addr)
    client.wait_ready()
    games = _games(client, None)
    per_game = SIZES[args.size]
    console.rule(f"random bots: {per_game} matches of each of {len(games)} game(s)")
    plan = []
    for g in games:
        for i in range(per_game):
            plan.append((g.game_id, g.min_players + i % (g.max_players - g.min_players + 1)))
    results = play_matches(client, plan, seed=args.seed, workers=args.workers)
    console.print(results_table(results))
    console.print("Replay any of these with their match id.")
    return 0


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Every command and option of `famiglia` (the docs' examples are checked against it)."""
    parser = argparse.ArgumentParser(prog="famiglia", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="start the stack and play the main job")
    run.add_argument("--size", choices=sorted(SIZES), default="quick",
                     help="quick (the default: no new match starts after 60 s), normal (after 15 min) "
                          "or long (docs/bots.md, \"make run\")")
    run.add_argument("--seed", type=int, default=1,
                     help="the tournament's seed, from which every deal follows (default: 1)")
    run.add_argument("--workers", type=_positive, default=4,
                     help="matches in play at once, at least (default: 4; 4 per core when more)")
    run.add_argument("--keep-up", action="store_true", help="leave the stack running afterwards")
    run.set_defaults(func=cmd_run)
    sub.add_parser("up", help="start the embedded stack").set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop the embedded stack").set_defaults(func=cmd_down)
    sub.add_parser("status", help="what the embedded stack runs").set_defaults(func=cmd_status)
    play = sub.add_parser("play", help="random matches over gRPC")
    play.add_argument("game", nargs="?", help="a game id (default: every game the server plays)")
    play.add_argument("--seats", type=int, default=0,
                      help="seats per match (default: each count the game allows, in turn)")
    play.add_argument("--matches", type=_positive, default=3, help="matches per game (default: 3)")
    play.add_argument("--seed", type=int, default=1, help="seed of the random choices (default: 1)")
    play.add_argument("--workers", type=_positive, default=4, help="matches in play at once (default: 4)")
    play.add_argument("--address", default="", help="command service (default: FAMIGLIA_COMMAND_ADDR; grpcs://: TLS)")
    play.set_defaults(func=cmd_play)
    # Each service's commands live in their own module with a `register(subparsers)`.
    for name in PLUGINS:
        try:
            module = importlib.import_module(f"famiglia.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"famiglia.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _stopped_by_signals(), exit_on_bad_setting():  # a bad TLS setting: its one line, no traceback
            return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (Stopped): what was started is stopped
        signum = getattr(exc, "signum", signal.SIGINT)
        with contextlib.suppress(OSError):  # a closed terminal
            console.print(f"[yellow]interrupted[/] ({signal.Signals(signum).name})")
        return 128 + signum
    except grpc.FutureTimeoutError:  # wait_ready on a service that is not there
        console.print("[red]UNAVAILABLE[/]: a famiglia service did not answer; is the stack up (`make up`)?")
        return 2
    except grpc.RpcError as exc:  # a refusal or an absent service: its status and code, one line
        code = error_code(exc)  # type: ignore[arg-type]
        details = exc.details() or ""  # type: ignore[attr-defined]
        said = "" if not code or code in details else f" ({escape(code)})"
        console.print(f"[red]{exc.code().name}[/]{said}: {escape(details)}", soft_wrap=True)  # type: ignore[attr-defined]
        return 2


if __name__ == "__main__":
    sys.exit(main())
