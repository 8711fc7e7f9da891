"""Agreement with torchvision's eval pipeline on the same images:
Resize(40) / CenterCrop(32) / ToTensor / Normalize (deterministic), compared
per channel (mean and std over all 240 images) and per image."""

import numpy as np
import pytest

from conftest import dataset_files

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def test_channel_statistics_match_torchvision(eval_plan, dataset):
    torch = pytest.importorskip("torch")
    transforms = pytest.importorskip("torchvision.transforms")
    from PIL import Image

    files = dataset_files(dataset)
    ours = np.zeros((len(files), 3, 32, 32), np.float32)
    filled = np.zeros(len(files), bool)
    for b in eval_plan.loader(threads=2):
        a = np.asarray(b["image"])
        for slot, idx in enumerate(b["image"].sample_indices):
            ours[idx] = a[slot]
            filled[idx] = True
    assert filled.all()

    tv = transforms.Compose([
        transforms.Resize(40, interpolation=transforms.InterpolationMode.BILINEAR),
        transforms.CenterCrop(32),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    theirs = torch.stack([tv(Image.open(f).convert("RGB")) for f in files]).numpy()
    assert theirs.shape == ours.shape

    # Per-channel statistics over the whole set (normalized units).
    for c in range(3):
        m_ours, m_tv = ours[:, c].mean(), theirs[:, c].mean()
        s_ours, s_tv = ours[:, c].std(), theirs[:, c].std()
        assert abs(m_ours - m_tv) < 0.005, (c, m_ours, m_tv)
        assert abs(s_ours / s_tv - 1) < 0.005, (c, s_ours, s_tv)
    # Per image: the same picture, up to decoder and resampler rounding.
    per_image = np.abs(ours - theirs).mean(axis=(1, 2, 3))
    assert per_image.max() < 0.02, per_image.max()  # measured: ~0.004
    assert np.abs(ours - theirs).max() < 0.1  # measured: ~0.02 (one uint8 step is 0.017)
    # And sharply different from another image's output (the test can fail).
    assert np.abs(ours[1:] - theirs[:-1]).mean() > 5 * np.abs(ours - theirs).mean()
