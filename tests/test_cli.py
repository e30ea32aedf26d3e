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


def test_plan_prints_layouts_and_json(capsys):
    argv = ["plan", "--model", "gpt3-175b", "--gpu", "H100", "--gpus", "256",
            "--global-batch", "2048", "--top", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "gpt3-175b on 256 x H100" in out and "step_time_s" in out
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["layouts"]) == 2 and data["layouts"][0]["tp"] * data["layouts"][0]["pp"] \
        * data["layouts"][0]["dp"] * data["layouts"][0]["cp"] == 256
    assert main(["plan", "--model", "gpt3-175b", "--gpu", "H10", "--gpus", "8",
                 "--global-batch", "8"]) == 2
    assert "H100" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "plan" in capsys.readouterr().out
