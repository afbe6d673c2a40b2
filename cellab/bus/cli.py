"""`cellab keys NAME --dir DIR`: make a CURVE key pair (NAME.key public, NAME.key_secret 0600)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from cellab.bus.keys import KeyFolderWarning, default_keys_dir, generate_keypair
from cellab.errors import CellabError


def keys_command(
    name: Annotated[str, typer.Argument(help="key name: 'controller' or an agent name")],
    dir: Annotated[Path | None, typer.Option("--dir", help="key directory (default $CELLAB_KEYS_DIR or "
                                                          "~/.config/cellab/keys)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace an existing key pair")] = False,
) -> None:
    """Make a CURVE key pair for the controller or an agent."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KeyFolderWarning)
            public_path, secret_path = generate_keypair(dir or default_keys_dir(), name, overwrite=force)
    except CellabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for warning in caught:
        typer.echo(f"warning: {warning.message}", err=True)
    typer.echo(f"public key: {public_path}  (copy to the peers that must trust {name})")
    typer.echo(f"secret key: {secret_path}  (mode 0600, stays on this host)")


# `app.add_typer(keys_app, name="keys")` gives `cellab keys NAME [--dir DIR] [--force]`: the command is
# the group's own callback (interspersed args, so options may follow NAME). keys_command can also be
# mounted directly with `app.command("keys")(keys_command)`.
keys_app = typer.Typer(help="CURVE key pairs for the lab bus", add_completion=False,
                       context_settings={"allow_interspersed_args": True})
keys_app.callback(invoke_without_command=True)(keys_command)

if __name__ == "__main__":
    keys_app()
