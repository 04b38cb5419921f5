"""The SIMULATED demo datasets: `python -m runners.demo` builds all three.

`build` is the command (re-exported here); `datasets` what the builders share,
`images` the drawn images, `ratings` and `attributes` the rating and attribute demos.
"""

from runners.demo.build import (
    COUNTRIES,
    DATASET,
    DEMO_JUDGES,
    DEMO_SCORER,
    GENERATORS,
    SCENES,
    SIMULATED_NOTE,
    Generator,
    build_demo,
    build_missing,
    build_pools,
    is_built,
    main,
)

__all__ = [
    "DATASET",
    "SIMULATED_NOTE",
    "COUNTRIES",
    "SCENES",
    "Generator",
    "GENERATORS",
    "DEMO_JUDGES",
    "DEMO_SCORER",
    "build_pools",
    "is_built",
    "build_demo",
    "main",
    "build_missing",
]
