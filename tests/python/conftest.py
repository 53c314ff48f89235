import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

HAS_GPU = torch.cuda.is_available()

# Under pytest-xdist every worker would otherwise start one intra-op thread per core: with 8
# workers on a 32-core machine the CPU backend's and the references' parallel loops then spin
# against each other (measured on the GPU machine: CPU cases taking 6-8 s instead of 10 ms).
# Give each worker its share of the cores.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))

# Every numerical test runs on the CPU backend and, where a GPU is visible, on the GPU backend
# (ROCm builds of PyTorch call AMD GPUs "cuda" too). Without a GPU those cases skip.
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_GPU, reason="no GPU visible")),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "exhaustive: full parameter sweeps and > 2^31-element cases; deselected by default, run once "
        "per kernel change with `-m exhaustive` (scripts/gpu_check.sh exhaustive)",
    )
