"""Shared builders: a small synthetic System whose every number the tests choose."""

import pytest

from pkroof.rooflines import Mechanism, System, TransferModel


def make_system(
    *,
    n: int = 8,
    per_node: int | None = None,
    sms: int = 100,
    flops: float = 1000e12,
    hbm: float = 3e12,
    alpha: float = 2e-6,
    peak: float = 400e9,
    per_cta: float = 20e9,
    ce_alpha: float = 10e-6,
    ce_peak: float = 380e9,
    nccl_peak: float = 300e9,
    nccl_alpha: float = 3e-6,
    nccl_ctas: int = 16,
    multimem: bool = False,
    net_peak: float = 50e9,
) -> System:
    mechanisms = {
        Mechanism.COPY_ENGINE: TransferModel(Mechanism.COPY_ENGINE, True, ce_alpha, ce_peak, None),
        Mechanism.SM_LOAD: TransferModel(Mechanism.SM_LOAD, True, alpha, peak, per_cta),
        Mechanism.SM_STORE: TransferModel(Mechanism.SM_STORE, True, alpha, peak, per_cta),
        Mechanism.TMA: TransferModel(Mechanism.TMA, True, alpha, peak, 4 * per_cta),
        Mechanism.MULTIMEM: TransferModel(Mechanism.MULTIMEM, multimem, alpha, peak, 4 * per_cta),
        Mechanism.NCCL: TransferModel(Mechanism.NCCL, True, nccl_alpha, nccl_peak, nccl_peak / nccl_ctas, nccl_ctas),
    }
    per_node = per_node or n
    network = TransferModel(Mechanism.NETWORK, True, 5e-6, net_peak, None) if n > per_node else None
    return System("synthetic", n, per_node, sms, {"bf16": flops, "fp8": 2 * flops}, hbm, 450e9, mechanisms, network)


@pytest.fixture
def system():
    return make_system()


@pytest.fixture(autouse=True)
def _no_saved_topology(tmp_path_factory, monkeypatch):
    """Every test sees the default preset as the default topology: no $PKROOF_TOPOLOGY, and a config folder of its
    own, so a topology saved on the machine running the tests (pkroof probe --save) changes nothing."""
    monkeypatch.delenv("PKROOF_TOPOLOGY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


def _num_gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config, items):
    """`gpu` tests need one NVIDIA GPU, `multigpu` tests two: skipped cleanly where they are missing."""
    gpus = None
    for item in items:
        need = 2 if "multigpu" in item.keywords else 1 if "gpu" in item.keywords else 0
        if need:
            gpus = _num_gpus() if gpus is None else gpus
            if gpus < need:
                item.add_marker(pytest.mark.skip(reason=f"needs {need} NVIDIA GPU(s), found {gpus}"))


@pytest.fixture(autouse=True, scope="session")
def _own_trace_cache(tmp_path_factory):
    """Tests never read or fill the user's trace cache (~/.cache/pkroof/traces): one of their own, per session."""
    import os

    before = os.environ.get("PKROOF_TRACE_CACHE")
    os.environ["PKROOF_TRACE_CACHE"] = str(tmp_path_factory.mktemp("trace-cache"))
    yield
    if before is None:
        os.environ.pop("PKROOF_TRACE_CACHE", None)
    else:
        os.environ["PKROOF_TRACE_CACHE"] = before
