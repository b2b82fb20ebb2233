"""`hpml-lab slurm`: sbatch scripts for one node (torchrun --standalone) and several (srun + torchrun, c10d)."""
import subprocess

import pytest

from hpml_lab.report import cli, slurm
from hpml_lab.config import ConfigError


def _bash_n(path):
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_one_node_script(tmp_path):
    out = tmp_path / "one.sbatch"
    assert cli.main(["slurm", "c1", "--gpus", "2", "--time", "00:30", "--partition", "gpu",
                     "-p", "batch_size=512", "-o", str(out)]) == 0
    _bash_n(out)
    text = out.read_text()
    assert "#SBATCH --gpus-per-node=2" in text and "#SBATCH --nodes=1" in text
    assert "#SBATCH --time=00:30:00" in text and "#SBATCH --partition=gpu" in text
    assert "torch.distributed.run --standalone --nproc-per-node=2" in text and "srun" not in text
    assert "--batch-size 512" in text and "--task c1" in text
    assert "hpml_lab.report.cli run c1 --profile full -p batch_size=512" in text  # papermill + HTML at the end
    assert "HPML_PROGRESS=log" in text and "check_dataset" in text


def test_multi_node_script(tmp_path):
    path = slurm.write("c1", out=str(tmp_path / "multi.sbatch"), gpus=4, nodes=2, time="1-02:00")
    _bash_n(path)
    text = path.read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --ntasks-per-node=1" in text
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in text
    assert "srun --nodes=" in text and "--rdzv-backend=c10d" in text
    assert '--rdzv-endpoint="$HEAD_NODE:$RDZV_PORT"' in text and "--nproc-per-node=4" in text
    assert "--standalone" not in text
    # the training step comes before the notebook
    assert text.index("-m hpml_lab") < text.index("hpml_lab.report.cli run c1")


@pytest.mark.parametrize("kw, match", [
    ({"time": "90 minutes"}, "--time"), ({"gpus": 0}, "--gpus"), ({"partition": "a b"}, "--partition"),
    ({"params": {"batch_sise": "3"}}, "unknown parameter"), ({"params": {"epochs": "x"}}, "epochs"),
])
def test_bad_input_is_one_line(kw, match):
    with pytest.raises(ConfigError, match=match):
        slurm.render("c1", **kw)


def test_unknown_task(capsys):
    assert cli.main(["slurm", "nope"]) == 2
    assert "valid tasks" in capsys.readouterr().err
