"""docs/examples/quickstart.py, the README's first run, runs and agrees with the reference on
every device of this machine."""

import importlib.util
import os

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "quickstart.py")


def test_quickstart_example(device, capsys):  # device: conftest's fixture, cpu and cuda
    spec = importlib.util.spec_from_file_location("quickstart", EXAMPLE)
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    quickstart.main(device)
    assert f"ok: causal_conv1d on {device} matches the reference" in capsys.readouterr().out
