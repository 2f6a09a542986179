"""The `tunebench` command and its one error boundary.

Expected failures (TunebenchError) print one line and exit with their code (2 for a bad
spec, 1 otherwise); Ctrl-C and SIGTERM exit 130 after teardown; anything unexpected exits
3 and leaves a crash log with versions and the traceback (secrets redacted).
"""

from __future__ import annotations

import inspect
import signal
import sys
import time
import traceback

import typer
from rich.console import Console
from rich.text import Text

from tunebench.errors import TunebenchError, one_line

try:  # typer >= 0.25 vendors click as typer._click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer uses click itself
    from click.exceptions import ClickException

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Benchmark and tune vLLM deployments: sweep engine args under GuideLLM load.",
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, highlight=False)


def _print_version(value: bool) -> None:
    if value:
        from tunebench.version import __version__

        typer.echo(f"tunebench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print tunebench's version and exit.",
    ),
) -> None:
    pass


_registered = False


def _register_commands() -> None:
    global _registered
    if _registered:
        return
    from tunebench.cli import (
        batch,
        check_machine,
        compare,
        demo_model,
        explain,
        export,
        helm_values,
        import_results,
        merge,
        report,
        results,
        runs,
        sweep,
        tune,
        upload,
    )

    sweep.register(app)
    merge.register(app)
    tune.register(app)
    helm_values.register(app)
    batch.register(app)
    compare.register(app)
    report.register(app)
    import_results.register(app)
    export.register(app)
    runs.register(app)
    explain.register(app)
    results.register(app)
    upload.register(app)
    demo_model.register(app)
    check_machine.register(app)
    for command in app.registered_commands:
        if command.help is None and command.callback is not None:
            command.help = reflowed_help(command.callback.__doc__ or "")
    _registered = True


def reflowed_help(doc: str) -> str:
    """A docstring's prose paragraphs on one line each, so that the terminal wraps them at
    its own width (Typer keeps a paragraph's line breaks, and an 80-column terminal then
    breaks each source line again, mid-sentence); a paragraph with indented lines (examples,
    lists) keeps its lines."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(
        paragraph
        if any(line[:1].isspace() for line in paragraph.splitlines()[1:])
        else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs
    )


def _sigterm_as_interrupt(signum, frame):  # noqa: ARG001
    # Same path as Ctrl-C: every `finally` tears down servers and load processes.
    raise KeyboardInterrupt


def _crash_log(exc: BaseException) -> str:
    from tunebench.environment import cache_root, versions
    from tunebench.redact import redact_text

    directory = cache_root() / "crash"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
    text = f"argv: {sys.argv}\nversions: {versions()}\n\n" + "".join(
        traceback.format_exception(exc)
    )
    path.write_text(redact_text(text))
    return str(path)


def run() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    # A process started in the background by a non-interactive shell inherits SIGINT as
    # ignored, and Python then never raises KeyboardInterrupt: `kill -INT` would not stop
    # a sweep cleanly. Ctrl-C/SIGINT always means "stop and clean up" here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())


def _usage_line(exc: ClickException) -> str:
    """Click's usage error as one line: what is wrong and where the help is (Click's own
    print is a usage block, a hint and the error on three lines)."""
    message = one_line(exc.format_message())
    names = []
    context = getattr(exc, "ctx", None)
    while context is not None and context.parent is not None:  # the root is the program
        names.insert(0, context.info_name)
        context = context.parent
    return f"{message} (see `{' '.join(['tunebench', *names])} --help`)"


def main(argv: list[str] | None = None) -> int:
    """Run the command in `argv` (default: the process's arguments); its exit code."""
    _register_commands()
    try:
        # standalone_mode=False returns a command's typer.Exit code instead of exiting.
        code = app(args=argv, standalone_mode=False)
        return code if isinstance(code, int) else 0
    except TunebenchError as exc:
        from tunebench.redact import redact_text

        err_console.print(
            Text("error: ", style="bold red") + Text(redact_text(str(exc))), soft_wrap=True
        )
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted", style="yellow")
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return 130
    except ClickException as exc:  # usage errors: unknown command or option, exit 2
        err_console.print(
            Text("error: ", style="bold red") + Text(_usage_line(exc)), soft_wrap=True
        )
        return exc.exit_code
    except Exception as exc:
        from tunebench.redact import redact_text

        path = _crash_log(exc)
        err_console.print(
            Text(
                one_line(
                    redact_text(f"internal error: {type(exc).__name__}: {exc}; crash log: {path}")
                ),
                style="red",
            ),
            soft_wrap=True,
        )
        return 3


if __name__ == "__main__":
    run()
