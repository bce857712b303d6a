"""The benchmark kit of pytest-tokaudit (benchmarks/README.md).

    nox -s bench                               # the lean environment, every case, JSON out
    python -m benchmarks.run --size small      # the same in the current environment

Not part of the package: nothing here is installed, and nothing here imports a private
name of `pytest_tokaudit` (the plugin is run through pytest command lines).
"""
