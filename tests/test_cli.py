"""The command line: version, help listing every command, honest 'not implemented yet'."""

import subprocess
import sys

from mcutrain import __version__, cli


def test_version():
    out = subprocess.run([sys.executable, "-m", "mcutrain.cli", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"mcutrain {__version__}"


def test_help_lists_every_command(capsys):
    parser = cli.build_parser()
    text = parser.format_help()
    for name in cli.COMMANDS:
        assert name in text


def test_unbuilt_command_says_so_and_fails(capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ["no-such-command"])
    assert cli.main(["no-such-command"]) == 2
    assert "not implemented yet" in capsys.readouterr().err
