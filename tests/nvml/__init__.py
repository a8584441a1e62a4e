"""An NVML of our own for the tests: see library.py and README.md."""
