"""Two tables compared as the engine tests compare them: the same columns and rows, text and counts
exactly, numbers within a stated tolerance."""

from __future__ import annotations

import numpy as np
import pandas as pd


def assert_frames_close(left: pd.DataFrame, right: pd.DataFrame, tolerance: float, name: str = "") -> None:
    """Same columns and length; numeric columns equal within `tolerance` (relative and absolute, NaN where
    NaN), every other column equal as text."""
    assert list(left.columns) == list(right.columns) and len(left) == len(right), name
    for column in left.columns:
        if left[column].dtype.kind in "fi":
            np.testing.assert_allclose(left[column].to_numpy(float), right[column].to_numpy(float), rtol=tolerance,
                                       atol=tolerance, equal_nan=True, err_msg=f"{name}: {column}")
        else:
            assert left[column].astype(str).tolist() == right[column].astype(str).tolist(), f"{name}: {column}"
