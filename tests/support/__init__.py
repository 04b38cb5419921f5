"""What the tests share that is not a pytest fixture: builders of small datasets and databases,
helpers that read what the commands and the app wrote, and the repository's paths (`paths`).

Not a test module: nothing here is collected. Shared pytest fixtures live in the nearest common
`conftest.py` and use these helpers; test modules import from `tests.support`, never from one another.
"""
