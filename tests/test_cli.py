"""The command line: help, env and a clear error for an unknown benchmark."""
import json

from companion.__main__ import main


def test_help_and_unknown(capsys):
    assert main(["--help"]) == 0 and "bench" in capsys.readouterr().out
    assert main(["bench", "nope"]) == 2 and "gemm" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2


def test_env_prints_provenance(capsys):
    assert main(["env"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["python"].startswith("3.") and "torch" in info
