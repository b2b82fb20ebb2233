import json
import pickle

import numpy as np
import pytest

from hpml_lab.config import RunConfig
from hpml_lab.data import DatasetError, build_train_loader, cifar, cifar_files, dataset_info


def test_synthetic_files_read_back_with_plain_pickle(cifar_root):
    folder = cifar_root / "cifar-10-batches-py"
    with open(folder / "data_batch_1", "rb") as f:
        d = pickle.load(f, encoding="bytes")
    assert set(d) == {b"data", b"labels", b"filenames", b"batch_label"}
    assert d[b"data"].dtype == np.uint8 and d[b"data"].shape == (200, 3072)
    assert len(d[b"labels"]) == 200 and all(0 <= x < 10 for x in d[b"labels"])
    with open(folder / "batches.meta", "rb") as f:
        meta = pickle.load(f, encoding="bytes")
    assert meta[b"label_names"][0] == b"airplane" and len(meta[b"label_names"]) == 10
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(  # .hpml-* caches
        cifar.TRAIN_FILES + cifar.TEST_FILES + [cifar.META_FILE, cifar.MARKER]
    )


def test_synthesis_is_deterministic_and_marked(tmp_path, cifar_root):
    cifar.synthesize(tmp_path, seed=0, n_train=1000, n_test=200)
    a = json.loads((tmp_path / "cifar-10-batches-py" / cifar.MARKER).read_text())
    b = json.loads((cifar_root / "cifar-10-batches-py" / cifar.MARKER).read_text())
    assert a["md5"] == b["md5"]
    assert cifar.check(tmp_path, verify_md5=True) == "synthetic"


def test_dataset_reads_rgb_planes_in_hwc(cifar_root):
    ds = cifar_files.CIFAR10Files(cifar_root, train=True)
    with open(cifar_root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        raw = pickle.load(f, encoding="bytes")[b"data"][0]
    assert ds.data.shape == (1000, 32, 32, 3)
    assert np.array_equal(ds.data[0][..., 0].ravel(), raw[:1024])  # red plane
    assert np.array_equal(ds.data[0][..., 2].ravel(), raw[2048:])  # blue plane
    assert len(cifar_files.CIFAR10Files(cifar_root, train=False)) == 200


def test_loader_gives_normalised_batches(cifar_root):
    cfg = RunConfig(data_root=str(cifar_root), batch_size=16, num_workers=0)
    x, y = next(iter(build_train_loader(cfg, __import__("torch").device("cpu"))))
    assert x.shape == (16, 3, 32, 32) and y.shape == (16,)
    assert -3 < x.mean() < 3 and x.dtype.is_floating_point
    assert dataset_info(cfg)["kind"] == "synthetic"


def test_missing_dataset_names_the_command_that_prepares_it(tmp_path):
    with pytest.raises(DatasetError) as e:
        cifar.check(tmp_path / "nothing")
    assert "hpml-lab data synth cifar10" in str(e.value) and "\n" not in str(e.value)


def test_corruption_is_detected(tmp_path):
    cifar.synthesize(tmp_path, seed=1, n_train=50, n_test=10)
    f = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="corrupted"):
        cifar.check(tmp_path, verify_md5=True)


def test_synth_refuses_to_overwrite_without_force(tmp_path):
    cifar.synthesize(tmp_path, n_train=50, n_test=10)
    with pytest.raises(DatasetError, match="--force"):
        cifar.synthesize(tmp_path, n_train=50, n_test=10)


def test_synthetic_files_also_load_like_python2_files_with_latin1(cifar_root):
    """torchvision reads the official files with encoding='latin1' and str keys; ours behave the same."""
    from torchvision.datasets import CIFAR10

    folder = cifar_root / "cifar-10-batches-py"
    with open(folder / "data_batch_2", "rb") as f:
        d = pickle.load(f, encoding="latin1")
    assert (
        set(d) == {"data", "labels", "filenames", "batch_label"}
        and d["batch_label"] == "training batch 2 of 5"
    )
    with open(folder / "batches.meta", "rb") as f:
        assert pickle.load(f, encoding="latin1")[CIFAR10.meta["key"]][:2] == ["airplane", "automobile"]


def _copy_without_marker(src, dst):
    import shutil

    shutil.copytree(src / cifar.FOLDER, dst / cifar.FOLDER)
    (dst / cifar.FOLDER / cifar.MARKER).unlink()
    return dst


def test_a_copy_without_the_marker_is_unverified_not_real(cifar_root, tmp_path):
    root = _copy_without_marker(cifar_root, tmp_path)
    assert cifar.kind(root) == "unverified"  # its md5s are not the published CIFAR-10's
    assert json.loads((root / cifar.FOLDER / cifar.VERIFIED).read_text())["kind"] == "unverified"  # cached
    assert cifar.kind(cifar_root) == "synthetic"


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda e: {**e, b"labels": e[b"labels"][:-1]}, "labels for"),
        (lambda e: {**e, b"labels": [12] + list(e[b"labels"][1:])}, "label 12 is not a class 0..9"),
        (lambda e: {**e, b"data": e[b"data"][:, :100]}, "not N x 3072"),
        (lambda e: {b"data": e[b"data"]}, "no 'data' or no 'labels'"),
    ],
)
def test_malformed_batch_files_are_one_line_naming_the_file(cifar_root, tmp_path, edit, message):
    root = _copy_without_marker(cifar_root, tmp_path)
    path = root / cifar.FOLDER / "data_batch_1"
    entry = pickle.loads(path.read_bytes(), encoding="bytes")
    path.write_bytes(pickle.dumps(edit(entry)))
    with pytest.raises(DatasetError, match=message) as err:
        cifar_files.CIFAR10Files(root)
    assert "data_batch_1" in str(err.value) and "\n" not in str(err.value)


def test_truncated_batch_file_is_one_line(cifar_root, tmp_path):
    root = _copy_without_marker(cifar_root, tmp_path)
    path = root / cifar.FOLDER / "data_batch_2"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DatasetError, match="data_batch_2 is not a readable batch file"):
        cifar_files.CIFAR10Files(root)


def test_chance_and_the_model_follow_the_datas_class_count(tmp_path):
    """A Tiny ImageNet of 4 classes (a partial or synthetic copy): its runs record 4 classes, the model has 4
    outputs, and C1 says chance 25% (it said 0.5%, a uniform guess over the official 200, shown as "chance
    0%")."""
    import pandas as pd

    from hpml_lab import results
    from hpml_lab.data import classes_of, tinyimagenet
    from hpml_lab.step import build_model
    from hpml_lab.studies.c1 import conclusion as c1_conclusion

    tinyimagenet.synthesize(tmp_path, classes=4, per_class=2, val_per_class=1, n_test=1, log=lambda _: None)
    cfg = RunConfig(task="c1", dataset="tinyimagenet", data_root=str(tmp_path), model="resnet_tiny")
    assert classes_of(cfg) == 4 and dataset_info(cfg)["classes"] == 4
    assert build_model(cfg).linear.out_features == 4
    assert classes_of(RunConfig(task="c1", dataset="tinyimagenet", data_root=str(tmp_path / "none"))) == 200
    n = 40
    batches = pd.DataFrame(
        {
            "epoch": [1 + i // 10 for i in range(n)],
            "batch": range(n),
            "loss": [1.38 - 0.02 * i for i in range(n)],
        }
        | {"acc": [0.25 + 0.01 * i for i in range(n)], "data_s": [0.01] * n, "train_s": [0.1] * n}
    )
    epochs = pd.DataFrame({"epoch": [1, 2, 3, 4], "total_s": [2.0, 1.0, 1.0, 1.0], "data_s": [0.1] * 4})
    elsewhere = RunConfig(task="c1", dataset="tinyimagenet", data_root=str(tmp_path / "gone"))
    run = results.Run(tmp_path, {"dataset": {"classes": 4}}, None, {"batches": batches, "epochs": epochs})
    answers, flags = c1_conclusion.conclude(
        elsewhere, run
    )  # the count the run recorded, not the official one
    chance = {x.name: x for x in answers[0].numbers}["chance top-1"]
    assert chance.value == 25 and "4 classes" in chance.source
    assert "chance 25%)" in " ".join(d.plain() for d in [answers[0].headline, *answers[0].details])
    assert not [f for f in flags if f.kind == "diverged"]  # ln 4 + 0.5 is the limit, not ln 200
