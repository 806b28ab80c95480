"""The torch data plane on the execution layer (fuzz/engines/dataplane/torch_plane.py; issue 34): KV
written when a step executes, attention through the worker's table with the worker's mask, compared
with the dense computation; each seeded bug of the execution campaign caught by the device side (a
``data[...]`` divergence, raised before the ledger's checks) at the event and step the ledger catches
it (tests/test_execution.py holds those to the step each bug fires)."""

from __future__ import annotations

import pytest

import torch  # noqa: E402  (a test dependency: the dataplane extra)

from swafloor.fuzz.engines.dataplane import torch_plane
from swafloor.fuzz.engines.dataplane.execution import BUG_HOOKS, campaign

EXAMPLES = 80


def test_the_spec_is_clean_on_the_device():
    result = campaign(None, EXAMPLES, make=torch_plane.maker("cpu"))
    assert result.divergence is None, (result.divergence, result.trace[-5:])


@pytest.mark.parametrize("name", sorted(BUG_HOOKS))
def test_each_seeded_bug_is_caught_by_the_device_where_the_ledger_catches_it(name):
    ledger = campaign(name, 200)
    device = campaign(name, 200, make=torch_plane.maker("cpu"))
    assert ledger.divergence is not None and device.divergence is not None
    assert device.divergence.field.startswith("data["), device.divergence.field  # the device side saw it first
    assert (device.example, device.divergence.event, device.divergence.step) == (
        ledger.example, ledger.divergence.event, ledger.divergence.step)


def test_a_mask_one_token_early_changes_the_output_not_the_keys_read():
    device = campaign("worker-mask-one-late", 50, make=torch_plane.maker("cpu"))
    assert "the output through the block table differs from the dense one" in device.divergence.message


def test_the_cli_refuses_bad_input_in_one_line(capsys):
    assert torch_plane.main(["no-such-bug"]) == 2
    assert torch_plane.main(["--examples", "0"]) == 2
    assert torch_plane.main(["--device", "tpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "'no-such-bug'" in err[0] and "--examples" in err[1] and "--device" in err[2]


def test_cuda_runs_where_present_and_is_refused_in_one_line_elsewhere(capsys):
    rc = torch_plane.main(["spec", "--examples", "3", "--device", "cuda"])
    if torch.cuda.is_available():
        assert rc == 0 and "device: cuda" in capsys.readouterr().out
    else:
        assert rc == 2 and "--device: 'cuda'" in capsys.readouterr().err
