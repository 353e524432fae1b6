"""`rlfit convert-weights` driven as a user drives it: a file it cannot read is named with the real reason (a
damaged safetensors file is not a PyTorch file that "needs torch"), one line, exit 2, nothing written."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.conftest import cli_in_process
from tests.networks.test_convert import hf_timesformer_state_dict, torchvision_r3d18_state_dict


def one_line_refusal(result, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_a_garbage_safetensors_file_as_a_subprocess_is_not_said_to_need_torch(run_cli, tmp_path):
    (tmp_path / "fake.safetensors").write_bytes(np.random.default_rng(0).bytes(300))
    result = run_cli("convert-weights", "fake.safetensors", "--kind", "timesformer", "--out", "out.safetensors",
                     cwd=tmp_path)
    line = one_line_refusal(result, "fake.safetensors is not a readable safetensors file", "(safetensors: ")
    assert "torch" not in line
    assert not (tmp_path / "out.safetensors").exists()


def _truncated(path):
    save_file(torchvision_r3d18_state_dict(), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGED = {
    "empty": lambda path: path.write_bytes(b""),
    "text": lambda path: path.write_text("these are not weights"),
    "seven bytes": lambda path: path.write_bytes(b"\x10\0\0\0\0\0\0"),
    "truncated": _truncated,
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_damaged_safetensors_files_name_the_file_and_safetensors_reason(capfd, tmp_path, damage):
    DAMAGED[damage](tmp_path / "model.safetensors")
    result = cli_in_process(capfd, "convert-weights", "model.safetensors", "--kind", "r3d18", "--out", "out.st",
                            cwd=tmp_path)
    line = one_line_refusal(result, "model.safetensors is not a readable safetensors file",
                            "(safetensors: Error while deserializing header")
    assert "torch" not in line
    assert not (tmp_path / "out.st").exists()


def test_garbage_under_a_pytorch_name_is_neither_format(capfd, tmp_path):
    (tmp_path / "model.pth").write_bytes(b"GIF89a" + bytes(100))
    result = cli_in_process(capfd, "convert-weights", "model.pth", "--kind", "r3d18", "--out", "out.st",
                            cwd=tmp_path)
    one_line_refusal(result, "model.pth is neither a PyTorch checkpoint (a zip or a pickle) nor a readable "
                             "safetensors file (safetensors: ")


def test_a_pickle_still_needs_torch_where_torch_is_missing(capfd, tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed here, so a pickle is read, not refused")
    (tmp_path / "model.safetensors").write_bytes(pickle.dumps({"stem.0.weight": np.zeros(3)}))
    result = cli_in_process(capfd, "convert-weights", "model.safetensors", "--kind", "r3d18", "--out", "out.st",
                            cwd=tmp_path)
    one_line_refusal(result, "model.safetensors (a PyTorch checkpoint) needs torch")


@pytest.mark.parametrize(("kind", "make", "dropped"), [
    ("r3d18", torchvision_r3d18_state_dict, "layer3.0.downsample.1.running_var"),
    ("timesformer", lambda: hf_timesformer_state_dict(768, 12, 16, 224, 8, 3), "embeddings.time_embeddings"),
    ("timesformer", lambda: hf_timesformer_state_dict(768, 12, 16, 224, 8, 3), "encoder.layer.5.output.dense.bias"),
])
def test_a_readable_file_without_some_tensors_names_what_is_missing(capfd, tmp_path, kind, make, dropped):
    state = make()
    del state[dropped]
    save_file(state, str(tmp_path / "model.safetensors"))
    result = cli_in_process(capfd, "convert-weights", "model.safetensors", "--kind", kind, "--out", "out.st",
                            cwd=tmp_path)
    one_line_refusal(result, "model.safetensors: the checkpoint lacks 1 of the ", f": {dropped};")
    assert not (tmp_path / "out.st").exists()


@pytest.mark.parametrize(("kind", "model", "count"), [("r3d18", "torchvision's r3d_18", 100),
                                                      ("timesformer", "Hugging Face's TimesformerModel", 25)])
def test_a_file_with_no_tensors_names_the_first_missing_ones(capfd, tmp_path, kind, model, count):
    save_file({}, str(tmp_path / "model.safetensors"))
    result = cli_in_process(capfd, "convert-weights", "model.safetensors", "--kind", kind, "--out", "out.st",
                            cwd=tmp_path)
    one_line_refusal(result, f"lacks {count} of the {count} tensors of {model}: ", f"and {count - 3} more")



def test_a_tensor_of_another_shape_is_named_as_a_convert_weights_problem(capfd, tmp_path):
    state = torchvision_r3d18_state_dict()
    state["layer2.0.conv1.0.weight"] = np.zeros((128, 64, 5, 3, 3), np.float32)  # a 5-frame kernel, not 3
    save_file(state, str(tmp_path / "model.safetensors"))
    result = cli_in_process(capfd, "convert-weights", "model.safetensors", "--kind", "r3d18", "--out", "out.st",
                            cwd=tmp_path)
    line = one_line_refusal(result, "model.safetensors: its tensors do not fit r3d18: params.layer2_0.conv1.kernel "
                                    "is (5, 3, 3, 64, 128) in the file but (3, 3, 3, 64, 128) in the model")
    assert "network.pretrained" not in line  # not a run's setting: the user is converting
    assert not (tmp_path / "out.st").exists()
